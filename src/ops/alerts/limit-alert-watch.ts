import { randomBytes } from 'node:crypto';
import type { Logger } from 'pino';
import { EVENTS, type EventSource, type LimitAlert, type SettledMessage } from '../../core/diagnostics.ts';
import type { Meter } from '../../core/limits.ts';
import type { AlertLog } from '../../stores/alerts/alert-log.ts';
import type { LimitLedger } from '../../usage/limit-ledger.ts';

const DAY_MS = 86_400_000;
// Claims known taken (by this instance or another) are remembered up to this many, then forgotten at once.
const KNOWN_LIMIT = 10_000;

/** A meter alerts watch: a money budget or token quota of a day or a month. */
type AlertMeter = Meter & { readonly kind: 'quota' | 'budget'; readonly period: 'day' | 'month' };

// End users' meters are many and each one's own: they are not alerted (nor are client addresses').
const UNWATCHED: ReadonlySet<string> = new Set(['end_user', 'address']);

const alerting = (meter: Meter): meter is AlertMeter =>
  (meter.kind === 'quota' || meter.kind === 'budget') && meter.period !== 'minute' && !UNWATCHED.has(meter.scope);

export interface LimitAlertWatchOptions {
  readonly source: EventSource;
  /** Where the counters are peeked (reservations in flight included). */
  readonly ledger: Pick<LimitLedger, 'peek'>;
  /** Where thresholds are claimed, once per window across instances. */
  readonly log: Pick<AlertLog, 'claim'>;
  /** The gateway's thresholds, for owners without their own `alerts`. */
  readonly thresholds: readonly number[];
  readonly logger: Logger;
  /** Told each watched meter's use after a settlement (the used-ratio gauge). */
  readonly onUse?: (meter: Meter, used: number) => void;
  readonly now?: () => number;
}

export interface LimitAlertWatch {
  /** Resolves once every settlement seen so far is evaluated (and its alerts published). */
  idle(): Promise<void>;
  close(): void;
}

/** The id of one firing. */
export const alertId = (): string => `alrt_${randomBytes(8).toString('hex')}`;

/** The claim of one threshold of one counter's window (a counter's name holds its window). */
export const claimOf = (meter: Pick<Meter, 'counter'>, threshold: number): string => `${meter.counter}@${threshold}`;

/** The thresholds `used` reaches of a meter's `limit`, lowest first. */
export function reached(thresholds: readonly number[], used: number, limit: number): number[] {
  return thresholds.filter((threshold) => used * 100 >= limit * threshold);
}

/**
 * Limit alerts, off the request path: each `exchange:settled` event names the meters its request reserved
 * on; after the settlement is applied (the next turn of the event loop, when the ledger sends it), the
 * money and token meters of days and months are peeked together, and each threshold their use reaches is
 * claimed (Redis `SET NX` until a day after the window ends, so it fires once whichever instance saw it);
 * the instance that took a claim publishes `limit:alert`. A claim the store cannot answer is tried again at
 * the next settlement of that meter.
 */
export function watchLimitAlerts(options: LimitAlertWatchOptions): LimitAlertWatch {
  const warn = warnUnreadable(options.logger);
  const claimReached = thresholdClaimer(options, warn);
  let pending = new Map<string, WatchedMeter>();
  let scheduled = false;
  let running: Promise<void> = Promise.resolve();

  const take = ({ exchange, meters }: SettledMessage) => {
    for (const meter of meters) {
      if (!alerting(meter) || pending.has(meter.counter)) continue;
      pending.set(meter.counter, { meter, team: teamOf(meter, exchange) });
    }
    if (scheduled || pending.size === 0) return;
    scheduled = true;
    // After the settlement this event comes before (a microtask), and after the ledger's batch it schedules.
    queueMicrotask(() => setImmediate(() => (running = running.then(evaluate))));
  };

  const evaluate = async () => {
    scheduled = false;
    const batch = [...pending.values()];
    pending = new Map();
    let used: number[];
    try {
      used = await options.ledger.peek(batch.map(({ meter }) => meter.counter));
    } catch (error) {
      return warn(error);
    }
    for (const [index, { meter, team }] of batch.entries()) {
      options.onUse?.(meter, used[index]!);
      await claimReached(meter, team, used[index]!);
    }
  };

  const off = EVENTS.settled.subscribe(options.source, take);
  return {
    async idle() {
      while (scheduled || pending.size > 0) await new Promise((resolve) => setImmediate(resolve));
      await running;
    },
    close: off,
  };
}

/** A meter a settlement reserved on, waiting to be peeked, with the team an alert of it names. */
interface WatchedMeter {
  readonly meter: AlertMeter;
  readonly team: string | null;
}

/** The team of a team's meter, or of the key a key's meter counts for. */
function teamOf(meter: AlertMeter, exchange: SettledMessage['exchange']): string | null {
  if (meter.scope === 'team') return meter.owner;
  return meter.scope === 'key' ? (exchange.caller?.team?.name ?? null) : null;
}

/**
 * Claims each threshold a meter's use reaches, and publishes `limit:alert` for those this instance claimed
 * first. A claim the store cannot answer ends the meter's turn (its next settlement tries again).
 */
function thresholdClaimer(
  options: LimitAlertWatchOptions,
  warn: (error: unknown) => void,
): (meter: AlertMeter, team: string | null, used: number) => Promise<void> {
  const now = options.now ?? Date.now;
  const known = new Set<string>();
  return async (meter, team, used) => {
    for (const threshold of reached(meter.alerts ?? options.thresholds, used, meter.limit)) {
      const claim = claimOf(meter, threshold);
      if (known.has(claim)) continue;
      let first: boolean;
      try {
        first = await options.log.claim(claim, meter.resetAt + DAY_MS);
      } catch (error) {
        return warn(error);
      }
      if (known.size >= KNOWN_LIMIT) known.clear();
      known.add(claim);
      if (first) EVENTS.limitAlert.publish(alertOf(options.source, meter, team, threshold, used, now()));
    }
  };
}

/** Warns that the counters or claims cannot be read, once a minute at most. */
function warnUnreadable(logger: Logger): (error: unknown) => void {
  let warned = false;
  return (error) => {
    if (warned) return;
    warned = true;
    // The message only: an ioredis error object may carry the connection options, password included.
    logger.warn(
      { reason: (error as Error).message },
      'limit alerts: the counters or claims cannot be read; tried again at the next settlement',
    );
    setTimeout(() => (warned = false), 60_000).unref();
  };
}

function alertOf(
  source: EventSource,
  meter: AlertMeter,
  team: string | null,
  threshold: number,
  used: number,
  at: number,
): LimitAlert {
  const budget = meter.kind === 'budget';
  return {
    source,
    id: alertId(),
    scope: meter.scope,
    owner: meter.owner,
    team,
    kind: meter.kind,
    period: meter.period,
    threshold,
    // Budgets count nano-USD.
    used: budget ? used / 1e9 : used,
    limit: budget ? meter.limit / 1e9 : meter.limit,
    unit: budget ? 'usd' : 'tokens',
    windowEnd: meter.resetAt,
    firedAt: at,
  };
}
