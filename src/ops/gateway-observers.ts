import type { Logger } from 'pino';
import { EVENTS, type EventSource } from '../core/diagnostics.ts';
import type { GuardrailActionLog } from '../stores/guardrail-actions/guardrail-action-log.ts';
import { guardrailReporter } from './guardrail-reporter.ts';
import type { GatewayMetrics } from './metrics.ts';
import { RequestObserver } from './request-observer.ts';
import { observeWebSockets } from './websocket-observer.ts';

export interface ObserverParts {
  readonly logger: Logger;
  /** The access log's own logger (its lines batched apart from the rest). */
  readonly accessLogger: Logger;
  readonly metrics: GatewayMetrics;
  /** Keeps the newest guardrail actions (`GET /admin/guardrails/actions`). */
  readonly guardrailActions?: Pick<GuardrailActionLog, 'record'>;
}

/**
 * Subscribes the gateway's standing observers to its events: the access log and the request metrics,
 * the upstream and cache metrics, the open-streams gauge, the failover warning, the plugin fault log
 * and metric, the guardrail metric, warnings and action log, and the WebSockets' lines and metrics.
 * Gives back the call that unsubscribes them all (a gateway that closes).
 */
export function observeGateway(source: EventSource, parts: ObserverParts): () => void {
  const { logger, metrics } = parts;
  const requests = new RequestObserver(parts.accessLogger, metrics);
  const guardrailActed = guardrailReporter(metrics, logger, parts.guardrailActions);
  const off = [
    EVENTS.request.subscribe(source, ({ req, res, observation }) => requests.watch(req, res, observation)),
    EVENTS.exchangeRecorded.subscribe(source, ({ exchange, record, recorded }) => {
      requests.exchange(record, recorded, exchange);
    }),
    EVENTS.upstreamCall.subscribe(source, ({ provider, origin, outcome }) =>
      metrics.upstreamAttempt(provider, origin, outcome),
    ),
    EVENTS.cache.subscribe(source, ({ result }) => metrics.cacheResult(result)),
    EVENTS.streamOpened.subscribe(source, () => metrics.streamOpened()),
    EVENTS.streamClosed.subscribe(source, () => metrics.streamClosed()),
    EVENTS.guardrail.subscribe(source, ({ acted }) => guardrailActed(acted)),
    observeWebSockets(source, parts.accessLogger, metrics),
    // The failover warning: the endpoint by its configured name, never its URL or key.
    EVENTS.endpointFailed.subscribe(source, (failed) => {
      const what = failed.status === undefined ? failed.reason : `answered ${failed.status}`;
      logger.warn(
        {
          provider: failed.provider,
          endpoint: failed.endpoint,
          status: failed.status,
          request_id: failed.exchange.requestId,
        },
        `upstream endpoint '${failed.endpoint}' of provider '${failed.provider}' ${what}`,
      );
    }),
    EVENTS.pluginFault.subscribe(source, (fault) => {
      metrics.pluginError(fault.plugin, fault.hook);
      logger.error(
        {
          plugin: fault.plugin,
          hook: fault.hook,
          route: fault.route,
          model: fault.model,
          request_id: fault.requestId,
          err: fault.cause,
        },
        `gateway plugin '${fault.plugin}' failed in its hook '${fault.hook}'`,
      );
    }),
  ];
  return () => off.forEach((unsubscribe) => unsubscribe());
}
