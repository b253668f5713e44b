import { endpointSeed, rendezvousScore, type EndpointSeed } from './rendezvous.ts';
import { outputCapOf, AttemptSignal, type UpstreamEndpoint, upstreamEndpoint } from './upstream-client.ts';
import type { RoutingSession } from './session-affinity.ts';
import type { Logger } from 'pino';
import { providerEndpointSettings, type GatewayConfig } from '../../config/gateway-config.ts';
import type { ProviderPlugin } from '../../plugins/plugin-contract.ts';
import { isGatewayError } from '../../core/gateway-errors.ts';
import { isEndpointFault, restsEndpoint, retryWaitMs, type RetryPolicy } from './failover/retry-policy.ts';
import type { ClientResponse } from '../http/client-connection.ts';
import { EVENTS, type AttemptStartMessage } from '../../core/diagnostics.ts';
import type { ExchangeView } from '../../core/exchange.ts';

/** Breaker and spread settings shared by every pool. */
export interface BreakerSettings {
  /** Consecutive failures after which an endpoint rests. */
  readonly failureThreshold: number;
  /** How long a tripped endpoint rests before one trial request decides, in ms. */
  readonly cooldownMs: number;
  /**
   * Prompt-cache-aware routing: a request with a session goes to the endpoint its session ranks highest
   * by weighted rendezvous hashing (see {@link EndpointPool.pick}). Default false here; the gateway's
   * config (`routing.affinity`) turns it on by default.
   */
  readonly affinity?: boolean;
}

/** One endpoint as `state()` shows it: never its key or URL. */
export interface EndpointState {
  /** The configured name, or the endpoint's 0-based index in its pool. */
  readonly name: string;
  readonly weight: number;
  /** `up`, `resting` (tripped or told to wait by Retry-After) or `trial` (one half-open request in flight). */
  readonly status: 'up' | 'resting' | 'trial';
  readonly consecutiveFailures: number;
  /** When the rest ends (epoch ms); 0 when up. */
  readonly restingUntil: number;
}

// Callers remembered per endpoint's run of failures at most (the run's count is kept when it is cleared).
const MAX_FAILING_CALLERS = 10_000;

/** One upstream endpoint of a pool with its breaker. */
export class PooledEndpoint {
  consecutiveFailures = 0;
  /** Epoch ms before which the endpoint is not picked; 0 when up. */
  restingUntil = 0;
  /** Whether the rest came from the breaker (so the next request is the one half-open trial). */
  tripped = false;
  trialInFlight = false;
  /** Per caller of the current run of failures, the second its last failure was counted in. */
  readonly failedBy = new Map<string, number>();
  /** Its part in rendezvous hashing, from its name (the same on every instance). */
  readonly seed: EndpointSeed;

  constructor(
    readonly endpoint: UpstreamEndpoint,
    readonly name: string,
    readonly weight: number,
  ) {
    this.seed = endpointSeed(name);
  }
}

/**
 * The endpoints of one provider, spread by weight over those not resting, each with a circuit breaker:
 * `failureThreshold` consecutive failures rest it for `cooldownMs`, after which one trial request
 * decides (success closes it, failure rests it again). A `Retry-After` rests it for that long. With
 * `affinity`, the requests of one session all go to one endpoint while it is available.
 */
export class EndpointPool {
  readonly endpoints: readonly PooledEndpoint[];
  /** Attempts one request makes at most (default: the number of endpoints, at most 5). */
  readonly maxAttempts: number;
  /** Whether a request's session picks its endpoint (see {@link pick}). */
  readonly affinity: boolean;

  constructor(
    endpoints: readonly PooledEndpoint[],
    private readonly breaker: BreakerSettings & { readonly maxAttempts?: number },
    private readonly now: () => number = Date.now,
    /** Draws the weighted pick (tests pass a fixed value to make the order predictable). */
    private readonly random: () => number = Math.random,
  ) {
    if (endpoints.length === 0) throw new Error('an endpoint pool needs at least one endpoint');
    this.endpoints = endpoints;
    this.maxAttempts = breaker.maxAttempts ?? Math.min(endpoints.length, 5);
    this.affinity = breaker.affinity ?? false;
  }

  /**
   * The next endpoint to try among those not resting and not in `tried`; `undefined` when none is left.
   * With a `session` (and `affinity`), the one with the highest weighted rendezvous score for it, so a
   * session keeps its endpoint, and when that one rests or failed, goes to its next-highest, the same
   * for every request of the session; without, one drawn at random by weight. Picking a tripped
   * endpoint whose cooldown is over makes it the half-open trial.
   */
  pick(tried?: readonly PooledEndpoint[], session?: RoutingSession): PooledEndpoint | undefined {
    const endpoints = this.endpoints;
    if (endpoints.length === 1) {
      const only = endpoints[0]!;
      if (tried?.includes(only) || !this.available(only)) return undefined;
      return this.take(only);
    }
    if (session !== undefined && this.affinity) return this.pickFor(session, tried);
    let total = 0;
    for (const candidate of endpoints)
      if (!tried?.includes(candidate) && this.available(candidate)) total += candidate.weight;
    if (total === 0) return undefined;
    let point = this.random() * total;
    let last: PooledEndpoint | undefined;
    for (const candidate of endpoints) {
      if (tried?.includes(candidate) || !this.available(candidate)) continue;
      last = candidate;
      point -= candidate.weight;
      if (point < 0) break;
    }
    return this.take(last!);
  }

  private pickFor(session: RoutingSession, tried: readonly PooledEndpoint[] | undefined): PooledEndpoint | undefined {
    let best: PooledEndpoint | undefined;
    let bestScore = -Infinity;
    for (const candidate of this.endpoints) {
      if (tried?.includes(candidate) || !this.available(candidate)) continue;
      const score = rendezvousScore(session, candidate.seed, candidate.weight);
      if (score > bestScore) {
        best = candidate;
        bestScore = score;
      }
    }
    return best && this.take(best);
  }

  /** The endpoint answered (any answer but a retryable failure): its breaker closes. */
  succeeded(endpoint: PooledEndpoint): void {
    if (endpoint.consecutiveFailures === 0 && endpoint.restingUntil === 0 && !endpoint.trialInFlight) return;
    endpoint.consecutiveFailures = 0;
    endpoint.restingUntil = 0;
    endpoint.tripped = false;
    endpoint.trialInFlight = false;
    endpoint.failedBy.clear();
  }

  /** Called when an endpoint starts (or extends) a rest, to share it with other instances. */
  onRest?: (endpoint: PooledEndpoint, restingUntil: number) => void;

  /**
   * The endpoint failed before the first byte; `retryAfterMs` (from a 429/503) rests it that long. A
   * failure of a `caller` (a key id) that already had one counted in the same second is not counted
   * again: one key alone cannot rest a provider for everyone by a burst of requests that fail.
   */
  failed(endpoint: PooledEndpoint, retryAfterMs?: number, caller?: string): void {
    const now = this.now();
    const before = endpoint.restingUntil;
    if (this.countsFailureOf(endpoint, caller, now)) endpoint.consecutiveFailures += 1;
    if (endpoint.trialInFlight || endpoint.consecutiveFailures >= this.breaker.failureThreshold) {
      endpoint.tripped = true;
      endpoint.restingUntil = Math.max(endpoint.restingUntil, now + this.breaker.cooldownMs);
    }
    endpoint.trialInFlight = false;
    if (retryAfterMs !== undefined && retryAfterMs > 0)
      endpoint.restingUntil = Math.max(endpoint.restingUntil, now + retryAfterMs);
    if (endpoint.restingUntil !== before && endpoint.restingUntil > now) this.onRest?.(endpoint, endpoint.restingUntil);
  }

  private countsFailureOf(endpoint: PooledEndpoint, caller: string | undefined, now: number): boolean {
    if (caller === undefined) return true;
    const second = Math.floor(now / 1000);
    if (endpoint.failedBy.get(caller) === second) return false;
    if (endpoint.failedBy.size >= MAX_FAILING_CALLERS) endpoint.failedBy.clear();
    endpoint.failedBy.set(caller, second);
    return true;
  }

  /** Another instance rests the endpoint until then (epoch ms): it rests here too. */
  restedElsewhere(endpoint: PooledEndpoint, restingUntil: number): void {
    if (restingUntil > endpoint.restingUntil && restingUntil > this.now()) endpoint.restingUntil = restingUntil;
  }

  /** An attempt ended without telling whether the endpoint is healthy (the client left): a trial is freed. */
  released(endpoint: PooledEndpoint): void {
    endpoint.trialInFlight = false;
  }

  /** Ms until the first resting endpoint may be tried again (at least 1000, rounded up to seconds). */
  retryAfterMs(): number {
    const now = this.now();
    let soonest = Infinity;
    for (const endpoint of this.endpoints) soonest = Math.min(soonest, Math.max(0, endpoint.restingUntil - now));
    return Math.max(1000, Math.ceil((Number.isFinite(soonest) ? soonest : 0) / 1000) * 1000);
  }

  /** A read-only snapshot of every endpoint, for metrics and the health view. */
  state(): EndpointState[] {
    const now = this.now();
    return this.endpoints.map((endpoint) => ({
      name: endpoint.name,
      weight: endpoint.weight,
      status: endpoint.trialInFlight ? 'trial' : endpoint.restingUntil > now ? 'resting' : 'up',
      consecutiveFailures: endpoint.consecutiveFailures,
      restingUntil: endpoint.restingUntil > now ? endpoint.restingUntil : 0,
    }));
  }

  private available(endpoint: PooledEndpoint): boolean {
    if (endpoint.restingUntil === 0) return !endpoint.trialInFlight;
    return !endpoint.trialInFlight && endpoint.restingUntil <= this.now();
  }

  private take(endpoint: PooledEndpoint): PooledEndpoint {
    if (endpoint.restingUntil !== 0) {
      // Its rest is over: a tripped breaker lets this one request through as the trial; a rest from
      // Retry-After alone just ends.
      if (endpoint.tripped) endpoint.trialInFlight = true;
      else endpoint.restingUntil = 0;
    }
    return endpoint;
  }
}

/** The one reader of `Retry-After` / `retry-after-ms`, also exported here where the pool's callers look for it. */
export { retryAfterMs } from './failover/retry-policy.ts';

/** Resolved upstream endpoints per vendor; `undefined` where the operator configured none. */
export interface ProviderEndpoints {
  /** The vendor's first endpoint (for views that show one). */
  get(vendor: string): UpstreamEndpoint | undefined;
  /** The vendor's endpoints with their breakers; `state()` lists them for metrics and health views. */
  pool(vendor: string): EndpointPool | undefined;
  /** Every configured vendor's pool. */
  pools(): ReadonlyMap<string, EndpointPool>;
  /** The env prefix an operator sets for the vendor, for the "not configured" message. */
  envPrefix(vendor: string): string;
}

export function envPrefixOf(plugin: ProviderPlugin): string {
  return plugin.envPrefix ?? plugin.vendor.toUpperCase().replace(/-/g, '_');
}

/**
 * Each plugin's pool of upstream endpoints from `<PREFIX>_BASE_URL` / `<PREFIX>_API_KEY` (or the
 * config file). A provider without a base URL stays unconfigured: start-up warns, and its models answer
 * 502 saying what to set. A pure function of its inputs, so a reloaded config can build new pools.
 */
export function providerEndpoints(
  plugins: readonly ProviderPlugin[],
  config: GatewayConfig,
  env: NodeJS.ProcessEnv,
  logger: Logger,
): ProviderEndpoints {
  const pools = new Map<string, EndpointPool>();
  const prefixes = new Map<string, string>();
  for (const plugin of plugins) {
    const prefix = envPrefixOf(plugin);
    prefixes.set(plugin.vendor, prefix);
    const settings = providerEndpointSettings(config, plugin.vendor, prefix, env);
    if (settings.length > 0) {
      const keyless = settings.filter((entry) => !entry.apiKey);
      if (keyless.length) {
        logger.warn(
          { provider: plugin.vendor },
          `provider '${plugin.vendor}' has a base URL but no key: set ${prefix}_API_KEY (its upstream will refuse the requests)`,
        );
      }
      const endpoints = settings.map(
        (entry) =>
          new PooledEndpoint(
            upstreamEndpoint(plugin.vendor, entry.baseUrl, entry.apiKey, entry.auth),
            entry.name,
            entry.weight,
          ),
      );
      pools.set(plugin.vendor, new EndpointPool(endpoints, { ...config.failover, affinity: config.routing.affinity }));
    } else {
      logger.warn(
        { provider: plugin.vendor },
        `provider '${plugin.vendor}' is not configured: set ${prefix}_BASE_URL (its models answer 502 until then)`,
      );
    }
  }
  return endpointsOf(pools, prefixes);
}

/** The {@link ProviderEndpoints} view of built pools. */
export function endpointsOf(
  pools: ReadonlyMap<string, EndpointPool>,
  prefixes: ReadonlyMap<string, string> = new Map(),
): ProviderEndpoints {
  return {
    get: (vendor) => pools.get(vendor)?.endpoints[0]!.endpoint,
    pool: (vendor) => pools.get(vendor),
    pools: () => pools,
    envPrefix: (vendor) => prefixes.get(vendor) ?? vendor.toUpperCase(),
  };
}

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

/**
 * Whether the client of one request went away before its answer was sent, and the cancel switch of
 * the upstream attempt running for it, pulled the moment the client goes.
 */
export class ClientWatch {
  gone = false;
  private current: AttemptSignal | undefined;

  constructor(res: ClientResponse) {
    res.once('close', () => {
      if (res.writableFinished) return;
      this.gone = true;
      this.current?.abort();
    });
  }

  /** A new cancel switch for the next attempt (also pulled by the attempt's own timeouts). */
  attemptSignal(): AttemptSignal {
    return (this.current = new AttemptSignal());
  }
}

/** Opens one attempt's event: the endpoint, the model sent and the serving model; gives the message back. */
export type AttemptSide = (
  member: PooledEndpoint,
  requestModel: string,
  model: string,
) => AttemptStartMessage | undefined;

const numberOf = (value: unknown): number | undefined =>
  typeof value === 'number' && Number.isFinite(value) ? value : undefined;

type Messages = NonNullable<AttemptStartMessage['inputMessages']>;

/**
 * The request's side of its attempt events (the GenAI operation, whether it streams, the sampling
 * parameters it sent and, only when a subscriber asked for content, its messages), read once from the
 * parsed body; undefined while nobody subscribes to attempts, so that attempts build no message.
 */
export function attemptStart(
  exchange: ExchangeView & { readonly body?: { readonly body: Record<string, unknown> } },
  stream: boolean,
  messagesOf: (body: Record<string, unknown>) => ReturnType<Messages>,
): AttemptSide | undefined {
  if (!EVENTS.attemptStart.activeFor(exchange)) return undefined;
  const body = exchange.body?.body ?? {};
  const { route } = exchange;
  const captured = exchange.watch.content ? messagesOf(body) : undefined;
  const request = {
    operation: route.genAiOperation,
    stream,
    maxTokens: route.outputCapFields && outputCapOf(body, route.outputCapFields),
    temperature: numberOf(body.temperature),
    topP: numberOf(body.top_p),
    ...(captured && { inputMessages: () => captured }),
  };
  return (member, requestModel, model) => {
    const { endpoint } = member;
    const message: AttemptStartMessage = {
      exchange,
      ...request,
      provider: endpoint.provider,
      requestModel,
      model,
      endpoint: member.name,
      origin: endpoint.origin,
    };
    EVENTS.attemptStart.publish(message);
    return message;
  };
}

/**
 * The W3C trace context an attempt sends upstream: its own span's when a subscriber opened one, else the
 * exchange's (an unsampled trace's), else none.
 */
export const attemptTraceparent = (exchange: ExchangeView, started: AttemptStartMessage | undefined) =>
  started?.traceparent ?? exchange.watch.traceparent;

/** A failover plan's `onFailure` for one exchange: the endpoint's failure as an event (the failover warning). */
export function endpointFailed(exchange: ExchangeView): FailoverPlan['onFailure'] {
  return (failed) => {
    if (EVENTS.endpointFailed.activeFor(exchange)) EVENTS.endpointFailed.publish({ exchange, ...failed });
  };
}
