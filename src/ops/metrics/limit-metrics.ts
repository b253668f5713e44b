import { Counter, Gauge, type Registry } from 'prom-client';
import type { Meter } from '../../core/limits.ts';

/** The 429s by reason and the refusals by kind and scope (`gateway_limit_used_ratio` reads {@link LimitUses}). */
export interface LimitMetrics {
  readonly rateLimited: Counter<'reason'>;
  readonly refusals: Counter<'kind' | 'scope'>;
}

/** One counter's use over its limit, and when its window ends. */
interface LimitUse {
  readonly ratio: number;
  readonly resetAt: number;
}

/** `scope period kind` → counter → its use. */
export type LimitUses = Map<string, Map<string, LimitUse>>;

/** Defines the limit metrics; `uses` is what `gateway_limit_used_ratio` reads at each scrape. */
export function defineLimitMetrics(registers: Registry[], uses: LimitUses): LimitMetrics {
  const rateLimited = new Counter({
    name: 'gateway_rate_limited_total',
    help: 'Requests answered 429, by reason',
    labelNames: ['reason'],
    registers,
  });
  const refusals = new Counter({
    name: 'gateway_limit_refusals_total',
    help: 'Requests refused by a limit, by what it counts (rpm, tpm, quota, budget, concurrency) and whose it is (key, team, group, end_user, address)',
    labelNames: ['kind', 'scope'],
    registers,
  });
  defineLimitUsedRatio(registers, uses);
  // Shown at 0 from the start, so a rate or an alert on them has a series before the first event.
  for (const reason of ['rate_limit', 'quota']) rateLimited.labels(reason).inc(0);
  for (const kind of ['rpm', 'tpm', 'quota', 'budget']) {
    for (const scope of ['key', 'team', 'end_user']) refusals.labels(kind, scope).inc(0);
  }
  // A group carries no request rate: only its token and money limits refuse.
  for (const kind of ['tpm', 'quota', 'budget']) refusals.labels(kind, 'group').inc(0);
  return { rateLimited, refusals };
}

/** The highest use of the budgets and quotas whose window is still open, by scope, period and kind. */
function defineLimitUsedRatio(registers: Registry[], uses: LimitUses): void {
  new Gauge({
    name: 'gateway_limit_used_ratio',
    help:
      'The highest use over limit (reservations in flight included) among the money budgets (kind budget) and token ' +
      'quotas (kind quota) of keys, teams and groups (scope) for the UTC day or month (period), as settlements ' +
      'this instance saw left them in the windows still open; 1 is the whole limit',
    labelNames: ['scope', 'period', 'kind'],
    registers,
    aggregator: 'max',
    collect() {
      this.reset();
      const now = Date.now();
      for (const [labels, ofLabels] of uses) {
        const highest = highestOpenUse(ofLabels, now);
        const [scope, period, kind] = labels.split(' ');
        if (highest !== undefined) this.set({ scope, period, kind }, highest);
        else uses.delete(labels);
      }
    },
  });
}

/** The highest ratio among the windows still open at `now`, dropping those that ended; undefined when none is. */
function highestOpenUse(uses: Map<string, LimitUse>, now: number): number | undefined {
  let highest: number | undefined;
  for (const [counter, use] of uses) {
    if (use.resetAt <= now) uses.delete(counter);
    else highest = Math.max(highest ?? 0, use.ratio);
  }
  return highest;
}

/** Keeps a day's or month's budget or quota as a settlement left it (`used` in the meter's unit, as its `limit`). */
export function recordLimitUse(
  uses: LimitUses,
  meter: Pick<Meter, 'scope' | 'period' | 'kind' | 'counter' | 'limit' | 'resetAt'>,
  used: number,
): void {
  const labels = `${meter.scope} ${meter.period} ${meter.kind}`;
  let ofLabels = uses.get(labels);
  if (!ofLabels) uses.set(labels, (ofLabels = new Map()));
  // Bounded: a full map starts over (each scrape drops the windows that ended).
  if (ofLabels.size >= 10_000 && !ofLabels.has(meter.counter)) ofLabels.clear();
  ofLabels.set(meter.counter, { ratio: meter.limit > 0 ? used / meter.limit : 0, resetAt: meter.resetAt });
}
