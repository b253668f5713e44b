import type { Logger } from 'pino';
import { EVENTS, type EventSource, type LimitAlert } from '../../core/diagnostics.ts';
import type { AlertLog } from '../../stores/alerts/alert-log.ts';
import type { LimitLedger } from '../../usage/limit-ledger.ts';
import type { GatewayMetrics } from '../metrics.ts';
import type { AlertSettings } from './alert-settings.ts';
import { deliverAlerts, firingEntryOf } from './alert-webhook.ts';
import { watchLimitAlerts } from './limit-alert-watch.ts';

export interface LimitAlertParts {
  readonly source: EventSource;
  readonly settings: AlertSettings;
  readonly ledger: Pick<LimitLedger, 'peek'>;
  readonly log: AlertLog;
  readonly logger: Logger;
  readonly metrics: Pick<GatewayMetrics, 'limitUse'>;
}

export interface LimitAlerts {
  /** Resolves once every settlement so far is evaluated, and every webhook delivery started has ended. */
  idle(): Promise<void>;
  /** Evaluates what settled so far, then stops: deliveries still waiting or in flight are dropped. */
  close(): Promise<void>;
}

const WHAT = { budget: 'budget', quota: 'token quota' } as const;

/** The log line of a firing: whose limit, which threshold, the use and the limit (never a secret). */
export function logAlert(logger: Logger, alert: LimitAlert): void {
  const { scope, owner, team, kind, period, threshold, used, limit, unit } = alert;
  const reached = threshold === 100 ? 'reached' : `at ${threshold} %`;
  logger.warn(
    { alert: alert.id, scope, owner, team, limit_kind: kind, period, percent: threshold, used, limit, unit },
    `${scope} ${WHAT[kind]} ${reached} for the ${period} (UTC)`,
  );
}

/**
 * Limit alerts of one gateway: the watch that fires them off settlements (see `watchLimitAlerts`), and
 * the subscribers of each firing here: the log line, the last firings kept (`GET /admin/alerts`) and the
 * signed webhook when one is configured. (The audit log and traces subscribe with the other observers.)
 */
export function startLimitAlerts(parts: LimitAlertParts): LimitAlerts {
  const { source, settings, log, logger } = parts;
  const off = EVENTS.limitAlert.subscribe(source, (alert) => {
    logAlert(logger, alert);
    log.fired(firingEntryOf(alert));
  });
  const watch = watchLimitAlerts({
    source,
    ledger: parts.ledger,
    log,
    thresholds: settings.thresholds,
    logger,
    onUse: (meter, used) => parts.metrics.limitUse(meter, used),
  });
  const webhook = settings.webhook && deliverAlerts({ source, settings: settings.webhook, log, logger });
  return {
    async idle() {
      await watch.idle();
      await webhook?.idle();
    },
    async close() {
      await watch.idle();
      watch.close();
      webhook?.close();
      off();
    },
  };
}
