import { isGatewayError } from '../../../core/gateway-errors.ts';
import type { AttemptSignal } from '../attempt-signal.ts';
import { PooledEndpoint, type EndpointPool } from '../endpoint-pool.ts';
import type { RoutingSession } from '../session-affinity.ts';
import type { ClientWatch } from './client-watch.ts';
import { isEndpointFault, restsEndpoint, retryWaitMs, type RetryPolicy } from './retry-policy.ts';

/**
 * What one attempt at one endpoint came to, as the route's attempt function reports it:
 * - `answer`: the endpoint answered (a success, or an answer that is final for this request); its
 *   breaker closes and the answer goes to the client;
 * - `retry`: a failure worth another attempt. `status` is the upstream's retryable status (see
 *   `isRetryableStatus`), absent when the failure was the transport's or the stream's (refused, reset,
 *   timed out, broke or erred before its first content); `waitMs` the upstream's `Retry-After`;
 *   `callerBound` when the attempt ended on a bound the caller chose (its own `timeout`, or what was
 *   left of the request's deadline), which says nothing of the endpoint: its breaker is not charged;
 *   `reached` when the upstream had the request and may have worked on it (a timeout, an answer or a
 *   stream that broke off) without its usage being read: usage accounting charges its input.
 */
export type AttemptResult<A, F> =
  | { readonly kind: 'answer'; readonly answer: A }
  | {
      readonly kind: 'retry';
      readonly failure: F;
      readonly status?: number;
      readonly waitMs?: number;
      readonly callerBound?: boolean;
      readonly reached?: boolean;
    };

export type Attempt<A, F> = (member: PooledEndpoint, signal: AttemptSignal) => Promise<AttemptResult<A, F>>;

/**
 * How a request's attempts ended:
 * - `answer`: `endpoint` (of `pool`) answered;
 * - `failed`: every attempt failed; `failure` is the last one's;
 * - `resting`: no endpoint could be tried (all rest);
 * - `client-gone`: the client left first (nothing is to be sent).
 */
export type FailoverOutcome<A, F> =
  | { readonly kind: 'answer'; readonly answer: A; readonly endpoint: PooledEndpoint; readonly pool: EndpointPool }
  | { readonly kind: 'failed'; readonly failure: F }
  | { readonly kind: 'resting' }
  | { readonly kind: 'client-gone' };

/** A failed attempt as the failover warning tells it: never a URL, a key or the upstream's own words. */
export interface FailedAttempt {
  readonly provider: string;
  /** The endpoint's configured name (or its index). */
  readonly endpoint: string;
  /** The upstream's retryable status; absent when the transport or the stream failed. */
  readonly status?: number;
  /**
   * The gateway's words for a failure without a status, after the endpoint's name: `failed: connection
   * refused`, `did not answer in time`, `failed: no content within 60000 ms`.
   */
  readonly reason?: string;
}

export interface FailoverPlan {
  /** Attempts at most, every endpoint and round included. */
  readonly maxAttempts: number;
  /** Whose request it is (the key id): an endpoint's breaker counts one caller's failures once per second. */
  readonly caller?: string;
  /**
   * The request's session: with a pool's affinity, it picks the endpoints, in the same order for each request of the
   * session.
   */
  readonly session?: RoutingSession;
  /**
   * Waits between rounds. Without it there is one round: each endpoint at most once, no waiting
   * (the compatible routes, which fail over but leave retries to the client's SDK).
   */
  readonly retry?: { readonly policy: RetryPolicy; readonly deadline: number };
  /**
   * Told of each attempt that failed (not one ended by the client's leaving, nor one ended
   * by a bound the caller chose), whether another attempt follows or not.
   */
  readonly onFailure?: (failed: FailedAttempt) => void;
}

/** The endpoint that served or failed last and the attempts made, across every call for one request. */
export interface AttemptTally {
  endpoint: PooledEndpoint | undefined;
  count: number;
  /** Failed attempts the upstream had the request of, whose usage was never read (see `reached`). */
  unreported: number;
  /** The client left while an attempt was running (the upstream had its request). */
  abandoned: boolean;
}

/** A tally before any attempt. */
export const newTally = (): AttemptTally => ({ endpoint: undefined, count: 0, unreported: 0, abandoned: false });

const CLIENT_GONE = { kind: 'client-gone' } as const;
const RESTING = { kind: 'resting' } as const;

/**
 * Tries `attempt` on the pool's endpoints until one answers. A round picks endpoints by weight (or by
 * the plan's session, see `EndpointPool.pick`), each at most once and at most `pool.maxAttempts` of
 * them, at once one after the other. When a round is used up and `plan.retry` allows, the gateway
 * waits (the upstream's `Retry-After`, else backoff) and starts a new round, in which the endpoint that
 * failed last may be tried again unless its breaker opened.
 * The breaker of each endpoint tried is kept here, and nowhere else.
 */
export async function attemptUpstream<A, F>(
  pool: EndpointPool,
  plan: FailoverPlan,
  client: ClientWatch,
  tally: AttemptTally,
  attempt: Attempt<A, F>,
): Promise<FailoverOutcome<A, F>> {
  const first = pool.pick(undefined, plan.session);
  if (!first) return RESTING;
  let member: PooledEndpoint = first;
  let tried: PooledEndpoint[] | undefined;
  let inRound = 0;
  for (let made = 1; ; made++) {
    const result: AttemptResult<A, F> | undefined = await attemptOnce(pool, member, client, tally, attempt, plan);
    if (result === undefined) return CLIENT_GONE;
    if (result.kind === 'answer') return { kind: 'answer', answer: result.answer, endpoint: member, pool };
    if (made >= plan.maxAttempts) return { kind: 'failed', failure: result.failure };
    (tried ??= []).push(member);
    const other = ++inRound < pool.maxAttempts ? pool.pick(tried, plan.session) : undefined;
    if (other) {
      member = other;
      continue;
    }
    const next: PooledEndpoint | typeof CLIENT_GONE | undefined =
      plan.retry && (await afterWait(pool, plan.retry, made - 1, result.waitMs, member, client, plan.session));
    if (next === undefined) return { kind: 'failed', failure: result.failure };
    if (!(next instanceof PooledEndpoint)) return CLIENT_GONE;
    member = next;
    tried = undefined;
    inRound = 0;
  }
}

/** One attempt, its breaker bookkeeping done; `undefined` when the client left meanwhile. */
async function attemptOnce<A, F>(
  pool: EndpointPool,
  member: PooledEndpoint,
  client: ClientWatch,
  tally: AttemptTally,
  attempt: Attempt<A, F>,
  plan: FailoverPlan,
): Promise<AttemptResult<A, F> | undefined> {
  tally.endpoint = member;
  tally.count += 1;
  let result: AttemptResult<A, F>;
  try {
    result = await attempt(member, client.attemptSignal());
  } catch (error) {
    pool.released(member);
    if (client.gone) {
      tally.abandoned = true;
      return undefined;
    }
    throw error;
  }
  if (result.kind === 'answer') {
    pool.succeeded(member);
    return result;
  }
  // A failure while the client was leaving says nothing of the endpoint.
  if (client.gone) {
    pool.released(member);
    tally.abandoned = true;
    return undefined;
  }
  if (result.reached) tally.unreported += 1;
  const status = result.status;
  // Only the endpoint's own faults count against it: never a bound the caller chose.
  if (!result.callerBound && (status === undefined || isEndpointFault(status)))
    pool.failed(member, status !== undefined && restsEndpoint(status) ? result.waitMs : undefined, plan.caller);
  else pool.released(member);
  if (plan.onFailure && !result.callerBound) plan.onFailure(failedAttempt(member, status, result.failure));
  return result;
}

/** What the failover warning says of a failed attempt: the status, else the gateway's own reason (a fixed text). */
function failedAttempt(member: PooledEndpoint, status: number | undefined, failure: unknown): FailedAttempt {
  const provider = member.endpoint.provider;
  const base = { provider, endpoint: member.name };
  if (status !== undefined) return { ...base, status };
  if (!isGatewayError(failure)) return { ...base, reason: 'failed' };
  // The error's detail names the provider first (`Upstream provider 'acme' failed: …`): the warning names it already.
  const named = `Upstream provider '${provider}' `;
  return {
    ...base,
    reason: failure.detail.startsWith(named) ? failure.detail.slice(named.length) : `failed: ${failure.detail}`,
  };
}

/** Waits before the next round; the endpoint to try then, `undefined` to stop, or CLIENT_GONE. */
async function afterWait(
  pool: EndpointPool,
  retry: NonNullable<FailoverPlan['retry']>,
  retriesMade: number,
  upstreamWaitMs: number | undefined,
  last: PooledEndpoint,
  client: ClientWatch,
  session: RoutingSession | undefined,
): Promise<PooledEndpoint | typeof CLIENT_GONE | undefined> {
  const wait = retryWaitMs(retry.policy, retriesMade, upstreamWaitMs, performance.now(), retry.deadline);
  if (wait === undefined) return undefined;
  await retry.policy.sleep(wait);
  if (client.gone) return CLIENT_GONE;
  // After waiting out a Retry-After the same endpoint may be tried again (the wait is what it asked
  // for); one whose breaker opened is not, and with every endpoint resting the last answer stands.
  return pool.pick(undefined, session) ?? (last.tripped ? undefined : last);
}
