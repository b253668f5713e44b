import { endpointSeed, rendezvousScore, type EndpointSeed } from './rendezvous.ts';
import type { RoutingSession } from './session-affinity.ts';
import type { UpstreamEndpoint } from './upstream-client.ts';

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
