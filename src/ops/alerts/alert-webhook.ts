import { randomBytes } from 'node:crypto';
import type { Logger } from 'pino';
import { request } from '../../core/undici-agent.ts';
import { EVENTS, type EventSource, type LimitAlert } from '../../core/diagnostics.ts';
import type { AlertDeliveryEntry, AlertFiringEntry, AlertLog } from '../../stores/alerts/alert-log.ts';
import type { WebhookSettings } from './alert-settings.ts';
import { backoffMs, DELIVERY_HEADER, SIGNATURE_HEADER, signWebhook, TIMESTAMP_HEADER } from './webhook-signature.ts';

/** A firing as kept and shown, without who published it. */
export function firingEntryOf(alert: LimitAlert): AlertFiringEntry {
  const { id, scope, owner, team, kind, period, threshold, used, limit, unit } = alert;
  const window_end = new Date(alert.windowEnd).toISOString();
  const fired_at = new Date(alert.firedAt).toISOString();
  return { id, scope, owner, team, kind, period, threshold, used, limit, unit, window_end, fired_at };
}

/** The webhook's JSON body of a firing. */
export function webhookBody(alert: LimitAlert): string {
  const { id, scope, owner, kind, period, threshold, used, limit, unit, window_end, fired_at } = firingEntryOf(alert);
  return JSON.stringify({
    id,
    type: 'limit.threshold',
    scope,
    owner,
    kind,
    period,
    threshold,
    used,
    limit,
    unit,
    window_end,
    fired_at,
  });
}

/** One attempt's POST: the receiver's status, or a throw (unreachable, timed out). */
export type AlertPost = (
  url: string,
  body: string,
  headers: Record<string, string>,
  signal: AbortSignal,
) => Promise<number>;

const post: AlertPost = async (url, body, headers, signal) => {
  const response = await request(url, {
    method: 'POST',
    body,
    headers: { ...headers, 'content-type': 'application/json' },
    signal,
  });
  // The answer's body is not read: only its status counts.
  await response.body.dump();
  return response.statusCode;
};

/** Why an attempt failed without a status, in words that never hold the URL. */
function failureOf(error: unknown, timedOut: boolean): string {
  if (timedOut) return 'timed out';
  const failure = error as { code?: unknown; cause?: { code?: unknown } };
  const code = failure.code ?? failure.cause?.code;
  if (code === 'ECONNREFUSED') return 'connection refused';
  if (code === 'ECONNRESET' || code === 'UND_ERR_SOCKET') return 'connection reset';
  if (code === 'ENOTFOUND' || code === 'EAI_AGAIN') return 'host not found';
  return typeof code === 'string' ? `failed (${code})` : 'failed';
}

// 408 and 429 ask to come back later; any other 4xx will not change by retrying.
const retryable = (status: number) => status === 408 || status === 429 || status >= 500;

export interface AlertWebhookOptions {
  readonly source: EventSource;
  readonly settings: WebhookSettings;
  readonly log: Pick<AlertLog, 'delivered'>;
  readonly logger: Logger;
  readonly post?: AlertPost;
  readonly now?: () => number;
}

export interface AlertWebhook {
  /** Resolves once every delivery started so far has ended (delivered, or its last attempt failed). */
  idle(): Promise<void>;
  /** Stops listening, cancels waiting retries and ends attempts in flight. */
  close(): void;
}

/**
 * Sends each `limit:alert` of this gateway to the configured webhook, never from a request's path: a
 * POST of the firing's JSON with `x-gateway-delivery` (the same on every attempt), `x-gateway-timestamp`
 * (unix seconds, each attempt's own) and `x-gateway-signature` (HMAC-SHA256 of `<timestamp>.<body>`).
 * An attempt not answered 2xx within the timeout is tried again after an exponential back-off (not for a
 * 4xx other than 408 and 429), up to the attempts set; each attempt goes to the delivery log.
 */
export function deliverAlerts(options: AlertWebhookOptions): AlertWebhook {
  const { settings, logger } = options;
  const send = options.post ?? post;
  const now = options.now ?? Date.now;
  const stopping = new AbortController();
  const deliveries = new Set<Promise<void>>();

  // True after `ms`; false at once when the deliverer closes.
  const wait = (ms: number) =>
    new Promise<boolean>((resolve) => {
      const stop = () => {
        clearTimeout(timer);
        resolve(false);
      };
      const timer = setTimeout(() => {
        stopping.signal.removeEventListener('abort', stop);
        resolve(true);
      }, ms);
      stopping.signal.addEventListener('abort', stop, { once: true });
    });

  const deliver = async (alert: LimitAlert) => {
    const delivery = `dlv_${randomBytes(8).toString('hex')}`;
    const body = webhookBody(alert);
    const kept = { delivery, alert: alert.id, owner: alert.owner, team: alert.team };
    for (let attempt = 1; attempt <= settings.attempts && !stopping.signal.aborted; attempt += 1) {
      const timestamp = Math.floor(now() / 1000);
      const headers = {
        [DELIVERY_HEADER]: delivery,
        [TIMESTAMP_HEADER]: String(timestamp),
        [SIGNATURE_HEADER]: signWebhook(settings.secret, timestamp, body),
      };
      const timeout = AbortSignal.timeout(settings.timeoutMs);
      let status: number | null = null;
      let error: string | null = null;
      try {
        status = await send(settings.url, body, headers, AbortSignal.any([stopping.signal, timeout]));
      } catch (failure) {
        error = failureOf(failure, timeout.aborted);
      }
      const ok = status !== null && status >= 200 && status < 300;
      const again =
        !ok && attempt < settings.attempts && (status === null || retryable(status)) && !stopping.signal.aborted;
      const delay = again ? backoffMs(attempt, settings.backoffMs, settings.maxBackoffMs) : 0;
      const entry: AlertDeliveryEntry = {
        ...kept,
        attempt,
        at: new Date(now()).toISOString(),
        outcome: ok ? 'delivered' : again ? 'retrying' : 'failed',
        status,
        error,
        next_attempt_at: again ? new Date(now() + delay).toISOString() : null,
      };
      options.log.delivered(entry);
      if (ok) return;
      const failed = { delivery, alert: alert.id, attempt, status, error };
      if (!again) return void logger.error(failed, 'limit alert webhook: not delivered; no attempt is left');
      logger.warn({ ...failed, retry_in_ms: delay }, 'limit alert webhook: attempt failed; retrying');
      if (!(await wait(delay))) return;
    }
  };

  const off = EVENTS.limitAlert.subscribe(options.source, (alert) => {
    const running = deliver(alert).catch((error: unknown) =>
      logger.error({ alert: alert.id, reason: (error as Error).message }, 'limit alert webhook failed'),
    );
    deliveries.add(running);
    void running.finally(() => deliveries.delete(running));
  });
  return {
    async idle() {
      while (deliveries.size) await Promise.all([...deliveries]);
    },
    close() {
      off();
      stopping.abort();
    },
  };
}
