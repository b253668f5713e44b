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
  const { logger } = options;
  const stopping = new AbortController();
  const deliverer: Deliverer = {
    settings: options.settings,
    send: options.post ?? post,
    now: options.now ?? Date.now,
    log: options.log,
    logger,
    stopping: stopping.signal,
  };
  const deliveries = new Set<Promise<void>>();
  const off = EVENTS.limitAlert.subscribe(options.source, (alert) => {
    const running = deliver(deliverer, alert).catch((error: unknown) =>
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

/** What every delivery works with. */
interface Deliverer {
  readonly settings: WebhookSettings;
  readonly send: AlertPost;
  readonly now: () => number;
  readonly log: Pick<AlertLog, 'delivered'>;
  readonly logger: Logger;
  /** Aborted when the deliverer closes. */
  readonly stopping: AbortSignal;
}

/** Which delivery of which firing an attempt belongs to, as the delivery log keeps it. */
type DeliveryOf = Pick<AlertDeliveryEntry, 'delivery' | 'alert' | 'owner' | 'team'>;

/** How one attempt ended. */
interface AttemptEnd {
  readonly attempt: number;
  /** The receiver's status; null when it did not answer. */
  readonly status: number | null;
  /** Why there is no status, in words that never hold the URL. */
  readonly error: string | null;
  readonly delivered: boolean;
  /** The back-off before the next attempt; undefined when none follows. */
  readonly retryInMs: number | undefined;
}

/** Tries one firing until an attempt is answered 2xx, no attempt is left or the deliverer closes. */
async function deliver(deliverer: Deliverer, alert: LimitAlert): Promise<void> {
  const { settings, logger, stopping } = deliverer;
  const delivery = `dlv_${randomBytes(8).toString('hex')}`;
  const body = webhookBody(alert);
  const kept: DeliveryOf = { delivery, alert: alert.id, owner: alert.owner, team: alert.team };
  for (let attempt = 1; attempt <= settings.attempts && !stopping.aborted; attempt += 1) {
    const end = await tryOnce(deliverer, delivery, body, attempt);
    deliverer.log.delivered(attemptEntry(kept, end, deliverer.now));
    if (end.delivered) return;
    const failed = { delivery, alert: alert.id, attempt, status: end.status, error: end.error };
    if (end.retryInMs === undefined)
      return void logger.error(failed, 'limit alert webhook: not delivered; no attempt is left');
    logger.warn({ ...failed, retry_in_ms: end.retryInMs }, 'limit alert webhook: attempt failed; retrying');
    if (!(await waitUnlessStopped(end.retryInMs, stopping))) return;
  }
}

/** One signed POST of a delivery, and whether and when it is tried again. */
async function tryOnce(deliverer: Deliverer, delivery: string, body: string, attempt: number): Promise<AttemptEnd> {
  const { settings, stopping } = deliverer;
  const timestamp = Math.floor(deliverer.now() / 1000);
  const headers = {
    [DELIVERY_HEADER]: delivery,
    [TIMESTAMP_HEADER]: String(timestamp),
    [SIGNATURE_HEADER]: signWebhook(settings.secret, timestamp, body),
  };
  const timeout = AbortSignal.timeout(settings.timeoutMs);
  let status: number | null = null;
  let error: string | null = null;
  try {
    status = await deliverer.send(settings.url, body, headers, AbortSignal.any([stopping, timeout]));
  } catch (failure) {
    error = failureOf(failure, timeout.aborted);
  }
  const delivered = status !== null && status >= 200 && status < 300;
  const again =
    !delivered && attempt < settings.attempts && (status === null || retryable(status)) && !stopping.aborted;
  const retryInMs = again ? backoffMs(attempt, settings.backoffMs, settings.maxBackoffMs) : undefined;
  return { attempt, status, error, delivered, retryInMs };
}

/** The delivery log's entry of an attempt. */
function attemptEntry(kept: DeliveryOf, end: AttemptEnd, now: () => number): AlertDeliveryEntry {
  const again = end.retryInMs !== undefined;
  return {
    ...kept,
    attempt: end.attempt,
    at: new Date(now()).toISOString(),
    outcome: end.delivered ? 'delivered' : again ? 'retrying' : 'failed',
    status: end.status,
    error: end.error,
    next_attempt_at: again ? new Date(now() + end.retryInMs).toISOString() : null,
  };
}

/** True after `ms`; false at once when `stopping` aborts. */
function waitUnlessStopped(ms: number, stopping: AbortSignal): Promise<boolean> {
  return new Promise<boolean>((resolve) => {
    const stop = () => {
      clearTimeout(timer);
      resolve(false);
    };
    const timer = setTimeout(() => {
      stopping.removeEventListener('abort', stop);
      resolve(true);
    }, ms);
    stopping.addEventListener('abort', stop, { once: true });
  });
}
