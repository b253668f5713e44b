/**
 * The one retry policy of every model route: which upstream answers are tried again, how long to wait
 * before a retry, and how an upstream's `Retry-After` / `retry-after-ms` is read. docs/reliability.md
 * ("Retry policy") describes it for operators.
 */

export interface RetryPolicy {
  /** Retries when the caller sends no `max_retries` (`/v1/chat`). */
  readonly defaultMaxRetries: number;
  /** First backoff; doubled per retry, with jitter. */
  readonly baseDelayMs: number;
  readonly maxDelayMs: number;
  /** Shortest wait between two attempts, whatever `Retry-After` says (`0` included). */
  readonly minDelayMs: number;
  /** Longest `Retry-After` honoured; a longer one ends the retries. */
  readonly maxRetryAfterMs: number;
  /**
   * Total time one request may take, every attempt and wait included; the attempt running when it
   * passes is cut and answered as a timeout. Each attempt is also bounded by the gateway's upstream
   * timeout (`UPSTREAM_TIMEOUT_MS`), which the caller's `timeout` may shorten but never extend.
   */
  readonly deadlineMs: number;
  readonly sleep: (ms: number) => Promise<void>;
  readonly random: () => number;
}

export const DEFAULT_RETRY_POLICY: RetryPolicy = {
  defaultMaxRetries: 2,
  baseDelayMs: 500,
  maxDelayMs: 8_000,
  minDelayMs: 250,
  maxRetryAfterMs: 60_000,
  deadlineMs: 600_000,
  sleep: (ms) => new Promise((resolve) => setTimeout(resolve, ms)),
  random: Math.random,
};

/**
 * Whether an upstream status is worth another attempt: 408 and 409 (the request timed out or met a
 * conflict upstream), 429, and every 5xx but 501 and 505 (which say the request can never be served
 * there). Other statuses are the answer, 4xx ones the client's own.
 */
export function isRetryableStatus(status: number): boolean {
  if (status >= 500) return status !== 501 && status !== 505 && status <= 599;
  return status === 408 || status === 409 || status === 429;
}

/**
 * Whether a retryable status counts against the endpoint's breaker: 429 and 5xx do (the endpoint is
 * overloaded or broken); 408 and 409 do not (they are about this request).
 */
export function isEndpointFault(status: number): boolean {
  return status === 429 || status >= 500;
}

/** Whether the status's `Retry-After` rests the endpoint that long (429 and 503, as their RFCs say). */
export function restsEndpoint(status: number): boolean {
  return status === 429 || status === 503;
}

type HeaderValue = string | string[] | undefined;
type Headers = Readonly<Record<string, HeaderValue>>;

const DECIMAL = /^\d+(\.\d+)?$/;

/**
 * Ms an upstream asks to wait: given the response headers, `retry-after-ms` (a decimal number of ms)
 * when readable, else `Retry-After` (decimal seconds or an HTTP date; a past date is 0); given a
 * single value, that value as `Retry-After`. `undefined` when absent or unreadable (empty, negative,
 * repeated, `soon`).
 */
export function retryAfterMs(headers: Headers, now?: number): number | undefined;
export function retryAfterMs(retryAfter: HeaderValue, now?: number): number | undefined;
export function retryAfterMs(from: Headers | HeaderValue, now = Date.now()): number | undefined {
  if (typeof from === 'object' && !Array.isArray(from)) {
    const ms = from['retry-after-ms'];
    if (typeof ms === 'string' && DECIMAL.test(ms.trim())) return Math.round(Number(ms));
    return retryAfterValueMs(from['retry-after'], now);
  }
  return retryAfterValueMs(from, now);
}

function retryAfterValueMs(value: HeaderValue, now: number): number | undefined {
  if (typeof value !== 'string') return undefined;
  const trimmed = value.trim();
  if (trimmed === '') return undefined;
  if (DECIMAL.test(trimmed)) return Math.round(Number(trimmed) * 1000);
  // An HTTP date names its day and month (`Date.parse` would also take `-1` as a year).
  const date = /^[a-z]{3,9},? /i.test(trimmed) ? Date.parse(trimmed) : NaN;
  return Number.isNaN(date) ? undefined : Math.max(0, date - now);
}

/** Exponential backoff with jitter: between half and all of `base × 2^retry`, capped. */
export function backoffMs(policy: RetryPolicy, retry: number): number {
  const ceiling = Math.min(policy.maxDelayMs, policy.baseDelayMs * 2 ** retry);
  return Math.round(ceiling / 2 + (policy.random() * ceiling) / 2);
}

/**
 * The wait before retry number `retry + 1` (0-based `retry` retries made so far): the upstream's
 * `Retry-After` when it sent one, else the backoff, never under `minDelayMs`. `undefined` means do not
 * retry: the wait is over `maxRetryAfterMs`, or the next attempt would start at or after `deadline`
 * (both on the `now` clock, ms).
 */
export function retryWaitMs(
  policy: RetryPolicy,
  retry: number,
  upstreamWaitMs: number | undefined,
  now: number,
  deadline: number,
): number | undefined {
  const wait = Math.max(policy.minDelayMs, upstreamWaitMs ?? backoffMs(policy, retry));
  if (wait > policy.maxRetryAfterMs) return undefined;
  if (now + wait >= deadline) return undefined;
  return wait;
}
