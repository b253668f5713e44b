import type { Logger } from 'pino';
import { WIRE_FORMATS } from '../core/formats/index.ts';
import type { Current } from '../core/current.ts';
import type { ModelRegistry, ResolvedModel } from '../core/model-registry.ts';
import type {
  TokenUsage,
  UpstreamRouteId,
  UsageExtractor,
  WireFormat,
  ModelPricing,
  RouteId,
} from '../plugins/plugin-contract.ts';
import type { ExchangeRecord, RecordedUsage, UsageAccounting, GuardrailMark, UsageOutcome } from '../core/exchange.ts';
import { estimateInputTokens, estimateUsage } from './token-estimate.ts';
import { randomUUID } from 'node:crypto';

/** The key id recorded when the gateway runs without authentication (tests, local trials). */
export const ANONYMOUS_KEY_ID = 'anonymous';

/**
 * Usage accounting for the routes: picks each answer's extractor (the plugin's own, else the
 * standard one of its wire format), turns an exchange into one priced record, estimates with a
 * tokenizer where the upstream reported nothing, and hands the record to the store.
 *
 * Which figures a record gets:
 * - usage reported and the answer complete: exactly what was reported;
 * - nothing consumed upstream (an upstream error, count_tokens): zero tokens, not estimated;
 * - consumed but no usage reported (a stream that broke off or ended without its usage event):
 *   tokenizer counts of the request and of the text streamed so far, `estimated: true`;
 * - a stream that did not complete (the client went away, or the upstream cut it before its terminal
 *   event) after some usage was reported (e.g. the input counts of a Messages `message_start`): the
 *   reported input, and the larger of the reported and the counted output, `estimated: true` when the
 *   counted output was taken.
 * Every record carries the exchange's `outcome`.
 */
export class GatewayUsageAccounting implements UsageAccounting {
  private readonly estimating = new Set<Promise<RecordedUsage>>();

  constructor(
    private readonly store: UsageStore,
    private readonly live: Current<{ readonly registry: ModelRegistry }>,
    private readonly logger: Logger,
    private readonly now: () => Date = () => new Date(),
  ) {}

  extractor(format: WireFormat, route: UpstreamRouteId, resolved: ResolvedModel): UsageExtractor {
    return this.live.current.registry.usageExtractor(route, resolved.canonicalId) ?? WIRE_FORMATS[format].usage;
  }

  streamedText(format: WireFormat, data: string): string {
    return WIRE_FORMATS[format].textOf(data);
  }

  charge(usage: TokenUsage, resolved: ResolvedModel) {
    return charge(usage, resolved.model.pricing);
  }

  record(exchange: ExchangeRecord): Promise<RecordedUsage> | undefined {
    try {
      const time = this.now();
      const reported = exchange.usage;
      // A plugin fault leaves the answer's usage unread or partly read, as a cut stream does.
      // So does a stream a guardrail ended: the upstream was dropped mid-answer (a blocked JSON answer came whole, its
      // usage with it).
      const cutShort = (exchange.stream && exchange.outcome !== 'complete') || exchange.outcome === 'plugin_error';
      const counts = exchange.route !== 'count-tokens';
      const needsEstimate = counts && exchange.consumed && (!reported || cutShort);
      // Earlier attempts the upstream had the request of, their usage never read: each costs the input.
      const unreported = counts ? (exchange.unreportedAttempts ?? 0) : 0;
      // Reported and complete, or nothing consumed upstream: the record is taken as it is.
      if (!needsEstimate && unreported === 0) {
        this.finish(exchange, time, reported, false);
        return undefined;
      }
      return this.estimate(exchange, time, needsEstimate, unreported);
    } catch (error) {
      this.logger.error({ err: error }, 'usage record failed');
      return undefined;
    }
  }

  /** Counts with the tokenizer what the upstream did not report, then records; the promise never rejects. */
  private estimate(
    exchange: ExchangeRecord,
    time: Date,
    needsEstimate: boolean,
    unreported: number,
  ): Promise<RecordedUsage> {
    const reported = exchange.usage;
    const counting = needsEstimate
      ? estimateUsage(exchange.requestBody(), exchange.responseText())
      : estimateInputTokens(exchange.requestBody()).then((inputTokens): TokenUsage => ({
          inputTokens,
          outputTokens: 0,
          cachedTokens: 0,
        }));
    const estimate = counting.then(
      (counted) => this.settle(exchange, time, estimatedUsage(reported, counted, needsEstimate, unreported)),
      (error: unknown) => {
        this.logger.error(
          { err: error },
          'usage estimate failed; recording the reported usage (or zero) flagged as estimated',
        );
        return this.settle(exchange, time, { usage: reported, estimated: true });
      },
    );
    // A store that throws must not leave the promise rejected (callers are told it never rejects).
    const recorded = estimate.catch((error: unknown): RecordedUsage => {
      this.logger.error({ err: error }, 'usage record failed');
      return { usage: reported, estimated: true };
    });
    this.estimating.add(recorded);
    void recorded.finally(() => this.estimating.delete(recorded));
    return recorded;
  }

  private settle(exchange: ExchangeRecord, time: Date, recorded: RecordedUsage): RecordedUsage {
    this.finish(exchange, time, recorded.usage, recorded.estimated);
    return recorded;
  }

  /** Builds the exchange's record, settles its reservation to it and hands it to the store. */
  private finish(exchange: ExchangeRecord, time: Date, usage: TokenUsage | undefined, estimated: boolean): void {
    const record = buildUsageRecord({
      keyId: exchange.keyId ?? ANONYMOUS_KEY_ID,
      endUser: exchange.endUser,
      route: exchange.route,
      requestedModel: exchange.resolved.requestedId,
      model: exchange.resolved.canonicalId,
      upstream: exchange.resolved.plugin.vendor,
      status: exchange.status,
      stream: exchange.stream,
      latencyMs: exchange.latencyMs,
      requestId: exchange.requestId,
      usage,
      estimated,
      outcome: exchange.outcome,
      endpoint: exchange.endpoint,
      attempts: exchange.attempts,
      pricing: exchange.resolved.model.pricing,
      time,
      cacheHit: exchange.cacheHit !== undefined,
      guardrails: exchange.guardrails,
    });
    // The reservation settles to the record's figures, estimated ones included (zero: released).
    exchange.settlement?.settle(record);
    this.store.record(record);
  }

  /** Resolves when every record taken so far has reached the store (estimates included). */
  async flush(): Promise<void> {
    await Promise.all(this.estimating);
    await this.store.flush();
  }
}

/**
 * The usage to record once the tokenizer has counted: the counts where nothing was reported, the larger
 * output where the answer was cut short, and each unreported attempt's input on top.
 */
function estimatedUsage(
  reported: TokenUsage | undefined,
  counted: TokenUsage,
  needsEstimate: boolean,
  unreported: number,
): RecordedUsage {
  let usage = reported;
  let estimated = false;
  if (needsEstimate && !reported) {
    usage = counted;
    estimated = true;
  } else if (needsEstimate && reported) {
    estimated = counted.outputTokens > reported.outputTokens;
    usage = { ...reported, outputTokens: Math.max(reported.outputTokens, counted.outputTokens) };
  }
  if (unreported > 0) {
    usage = {
      ...(usage ?? { outputTokens: 0, cachedTokens: 0 }),
      inputTokens: (usage?.inputTokens ?? 0) + counted.inputTokens * unreported,
    };
    estimated = true;
  }
  return { usage, estimated };
}

/** Key id → the older ids its usage was also recorded under. */
export type KeyIdAliasMap = ReadonlyMap<string, readonly string[]>;

/**
 * A usage store whose read-back of one key also sums what was recorded under that key's older ids
 * (static keys' ids of the previous scheme: see `stores/keys/legacy-key-ids.ts`), and whose rows per
 * key show that usage under the current id. Records are written as they come, under the current id.
 * The aliases are worked out on first read and kept once found; a failed lookup is tried again on the
 * next read.
 */
export class KeyIdAliases implements UsageStore {
  private aliases: Promise<KeyIdAliasMap> | undefined;

  constructor(
    private readonly inner: UsageStore,
    private readonly find: () => Promise<KeyIdAliasMap>,
  ) {}

  get healthy(): boolean {
    return this.inner.healthy;
  }

  /** The inner store's queue depth (for the metrics gauge), 0 when it has none. */
  get queueDepth(): number {
    return (this.inner as Partial<{ queueDepth: number }>).queueDepth ?? 0;
  }

  record(record: Parameters<UsageStore['record']>[0]): void {
    this.inner.record(record);
  }

  async query(query: UsageQuery): Promise<UsageRow[]> {
    if (query.groupBy === 'key') return this.perKey(query);
    if (query.keyId === undefined) return this.inner.query(query);
    const older = (await this.aliasMap()).get(query.keyId);
    if (!older?.length) return this.inner.query(query);
    const parts = await Promise.all([query.keyId, ...older].map((keyId) => this.inner.query({ ...query, keyId })));
    return sumRows(parts.flat(), query.groupBy);
  }

  /** Rows per key id, a row under an older id summed into its key's row under the current id. */
  private async perKey(query: UsageQuery): Promise<UsageRow[]> {
    const aliases = await this.aliasMap();
    const ids = query.keyId === undefined ? [undefined] : [query.keyId, ...(aliases.get(query.keyId) ?? [])];
    const rows = (await Promise.all(ids.map((keyId) => this.inner.query({ ...query, keyId })))).flat();
    const current = new Map<string, string>();
    for (const [id, older] of aliases) for (const old of older) current.set(old, id);
    return sumRows(
      rows.map((row) => ({ ...row, key_id: current.get(row.key_id!) ?? row.key_id })),
      'key',
    );
  }

  flush(): Promise<void> {
    return this.inner.flush();
  }

  close(): Promise<void> {
    return this.inner.close();
  }

  private aliasMap(): Promise<KeyIdAliasMap> {
    if (!this.aliases) {
      const finding = this.find();
      this.aliases = finding;
      finding.catch(() => {
        if (this.aliases === finding) this.aliases = undefined;
      });
    }
    return this.aliases.catch(() => new Map());
  }
}

/**
 * Rows summed per model, day, key id or team, sorted as a store sorts them (by that field; the team
 * null, keys in no team, last).
 */
export function sumRows(rows: readonly UsageRow[], groupBy: UsageQuery['groupBy'] | 'team'): UsageRow[] {
  const field = groupField(groupBy);
  const groups = new Map<string | null, Record<string, number | string | null>>();
  for (const row of rows) {
    const group = row[field] ?? null;
    const sum = groups.get(group);
    if (!sum) {
      groups.set(group, { ...row, [field]: group });
      continue;
    }
    for (const [name, value] of Object.entries(row)) {
      if (typeof value !== 'number') continue;
      const before = (sum[name] as number | undefined) ?? 0;
      // Money is summed in whole nano-USD, as the stores keep it, so no binary fraction creeps in.
      sum[name] =
        name === 'cost_usd' || name === 'saved_usd'
          ? (Math.round(before * 1e9) + Math.round(value * 1e9)) / 1e9
          : before + value;
    }
  }
  return [...groups.entries()]
    .sort(([a], [b]) => (a === b ? 0 : a === null ? 1 : b === null ? -1 : a < b ? -1 : 1))
    .map(([, row]) => row as UsageRow);
}

/** One request's usage, as stored and summed. */
export interface UsageRecord {
  /** Unique per request; a record is applied at most once, however often it is replayed. */
  readonly id: string;
  /** ISO time the request finished. */
  readonly time: string;
  readonly keyId: string;
  /** The end user the request named (`user`, `metadata.user_id` or `x-gateway-end-user`); absent: none. */
  readonly endUser?: string;
  readonly route: RouteId;
  readonly requestedModel: string;
  /** The resolved concrete model in canonical prefixed form (never an alias). */
  readonly model: string;
  /** The provider's vendor prefix. */
  readonly upstream: string;
  readonly status: number;
  readonly stream: boolean;
  readonly latencyMs: number;
  /** Every prompt token, cached ones included. */
  readonly inputTokens: number;
  readonly outputTokens: number;
  /** Prompt tokens read from the provider's cache (a part of `inputTokens`). */
  readonly cachedTokens: number;
  /** `inputTokens + outputTokens`. */
  readonly totalTokens: number;
  /** The quota figure; the rule is on {@link charge}. */
  readonly chargedTokens: number;
  readonly costUsd: number;
  /** True when the upstream reported no usage and the figures come from the tokenizer. */
  readonly estimated: boolean;
  /**
   * How the answer ended (see {@link UsageOutcome}): a stream the upstream cut is `upstream_cut`, not a
   * plain 200. Records written before this field existed have none; read them as `complete`.
   */
  readonly outcome: UsageOutcome;
  /** The upstream endpoint that served (its configured name or index; never its URL or key), when known. */
  readonly endpoint?: string;
  /** Upstream attempts the request made, failed-over ones included, when more than one. */
  readonly attempts?: number;
  /** The request's `x-request-id`, to find its access-log line (records written before it existed have none). */
  readonly requestId?: string;
  /**
   * `hit` when the response cache answered: the token counts are the stored answer's, `costUsd` and
   * `chargedTokens` are 0, and `savedUsd` is what the answer would have cost.
   */
  readonly cache?: 'hit';
  readonly savedUsd?: number;
  /** What guardrails blocked or redacted (name, phase, action), when any did; never what they found. */
  readonly guardrails?: readonly GuardrailMark[];
}

/** What a request knows when it is done, for {@link buildUsageRecord}. */
export interface UsageRecordInput extends Pick<
  UsageRecord,
  | 'keyId'
  | 'endUser'
  | 'route'
  | 'requestedModel'
  | 'model'
  | 'upstream'
  | 'status'
  | 'stream'
  | 'latencyMs'
  | 'endpoint'
  | 'attempts'
  | 'requestId'
> {
  /**
   * The usage to record: what the upstream reported, or an estimate (then set `estimated`).
   * `undefined` records zero tokens: an upstream error, or a route without usage (count_tokens).
   */
  readonly usage: TokenUsage | undefined;
  readonly estimated?: boolean;
  /** Default: `complete`. */
  readonly outcome?: UsageOutcome;
  readonly pricing: ModelPricing;
  /** Default: a fresh UUID. */
  readonly id?: string;
  /** When the request finished. Default: now. */
  readonly time?: Date;
  /** The response cache answered: nothing is charged, the cost is recorded as saved. */
  readonly cacheHit?: boolean;
  /** What guardrails blocked or redacted. */
  readonly guardrails?: readonly GuardrailMark[];
}

const count = (value: number): number => (Number.isFinite(value) && value > 0 ? Math.round(value) : 0);

/**
 * One priced record from what a request knows: whole, non-negative token counts (cached never above
 * input), total, charged tokens and cost from the model's pricing (see {@link charge}).
 *
 * @example
 * ```ts
 * store.record(buildUsageRecord({
 *   keyId: 'key_1', route: 'chat-completions', requestedModel: 'acme-latest', model: 'acme/model-1',
 *   upstream: 'acme', status: 200, stream: true, latencyMs: 812,
 *   usage: { inputTokens: 1200, outputTokens: 80, cachedTokens: 1024 },
 *   pricing: { input: 1, cachedInput: 0.1, output: 4 },
 * }));
 * ```
 */
export function buildUsageRecord(input: UsageRecordInput): UsageRecord {
  const inputTokens = count(input.usage?.inputTokens ?? 0);
  const usage: TokenUsage = {
    inputTokens,
    outputTokens: count(input.usage?.outputTokens ?? 0),
    cachedTokens: Math.min(count(input.usage?.cachedTokens ?? 0), inputTokens),
  };
  const priced = charge(usage, input.pricing);
  const { totalTokens } = priced;
  const chargedTokens = input.cacheHit ? 0 : priced.chargedTokens;
  const costUsd = input.cacheHit ? 0 : priced.costUsd;
  return {
    id: input.id ?? randomUUID(),
    time: (input.time ?? new Date()).toISOString(),
    keyId: input.keyId,
    ...(input.endUser !== undefined ? { endUser: input.endUser } : {}),
    route: input.route,
    requestedModel: input.requestedModel,
    model: input.model,
    upstream: input.upstream,
    status: input.status,
    stream: input.stream,
    latencyMs: Math.max(0, Math.round(input.latencyMs)),
    ...usage,
    totalTokens,
    chargedTokens,
    costUsd,
    estimated: input.estimated ?? false,
    outcome: input.outcome ?? 'complete',
    ...(input.endpoint !== undefined ? { endpoint: input.endpoint } : {}),
    ...(input.attempts !== undefined && input.attempts > 1 ? { attempts: input.attempts } : {}),
    ...(input.requestId ? { requestId: input.requestId } : {}),
    ...(input.cacheHit ? { cache: 'hit' as const, savedUsd: priced.costUsd } : {}),
    ...(input.guardrails?.length ? { guardrails: input.guardrails } : {}),
  };
}

/** Sums over a group of records, as the stores keep them. */
export interface UsageTotals {
  requests: number;
  input_tokens: number;
  output_tokens: number;
  cached_tokens: number;
  total_tokens: number;
  charged_tokens: number;
  /** Kept in whole nano-USD while summing, so that many small costs add up exactly (integer increments). */
  cost_nano_usd: number;
  /** Requests the response cache answered. */
  cache_hits: number;
  /** What those answers would have cost, in whole nano-USD. */
  saved_nano_usd: number;
}

export const TOTAL_FIELDS = [
  'requests',
  'input_tokens',
  'output_tokens',
  'cached_tokens',
  'total_tokens',
  'charged_tokens',
  'cost_nano_usd',
  'cache_hits',
  'saved_nano_usd',
] as const;

export function emptyTotals(): UsageTotals {
  return {
    requests: 0,
    input_tokens: 0,
    output_tokens: 0,
    cached_tokens: 0,
    total_tokens: 0,
    charged_tokens: 0,
    cost_nano_usd: 0,
    cache_hits: 0,
    saved_nano_usd: 0,
  };
}

/** What one record adds to its group's totals. */
export function recordTotals(record: UsageRecord): UsageTotals {
  return {
    requests: 1,
    input_tokens: record.inputTokens,
    output_tokens: record.outputTokens,
    cached_tokens: record.cachedTokens,
    total_tokens: record.totalTokens,
    charged_tokens: record.chargedTokens,
    cost_nano_usd: costNanoUsd(record.costUsd),
    cache_hits: record.cache === 'hit' ? 1 : 0,
    saved_nano_usd: record.savedUsd ? costNanoUsd(record.savedUsd) : 0,
  };
}

/** Adds `add` into `into`; a field `add` lacks (totals stored before it existed) adds nothing. */
export function addTotals(into: UsageTotals, add: Partial<UsageTotals>): UsageTotals {
  for (const field of TOTAL_FIELDS) into[field] += add[field] ?? 0;
  return into;
}

/** The UTC day (`YYYY-MM-DD`) a record is summed under. */
export function dayOf(time: string | Date): string {
  if (typeof time === 'string' && (time.length === 10 || time.endsWith('Z'))) return time.slice(0, 10);
  const date = typeof time === 'string' ? new Date(time) : time;
  return Number.isNaN(date.getTime()) ? String(time).slice(0, 10) : date.toISOString().slice(0, 10);
}

/** The derived figures of one usage under a model's pricing. */
export interface Charge {
  /** Input + output tokens (input already includes cached tokens). */
  readonly totalTokens: number;
  /** The token figure quotas are checked against; see {@link charge}. */
  readonly chargedTokens: number;
  /** USD, from the model's prices per 1M tokens. */
  readonly costUsd: number;
}

// Prices are read as whole nano-USD per 1M tokens, so the cache-read weight is a ratio of integers
// and charged tokens come out exact (0.3 / 3 in floating point is 0.09999999999999999).
const NANO = 1_000_000_000n;
const nanoUsd = (pricePerMillion: number): bigint => BigInt(Math.round(Math.max(0, pricePerMillion) * 1e9));
const ceilDiv = (numerator: bigint, denominator: bigint): bigint => (numerator + denominator - 1n) / denominator;

/**
 * What one usage costs under a model's pricing.
 *
 * With `cached` = cache-read input tokens (part of `input`) and prices in USD per 1M tokens:
 *
 * - `totalTokens` = input + output.
 * - `costUsd` = ((input − cached) × price.input + cached × price.cachedInput + output × price.output) / 1 000 000.
 * - `chargedTokens` = (input − cached) + output + ⌈cached × price.cachedInput / price.input⌉.
 *   Every token counts once, except cache reads, which count at their price ratio to uncached
 *   input, rounded up once per request. The ratio is capped at 1 (a cache read never counts more than
 *   an uncached token), and is 1 when the model has no input price (a free model still uses its
 *   quota). Prices are taken to the nano-USD, so the figure is exact: e.g. 1000 input with 400 cached
 *   and 500 output at 2.5 / 0.25 / 15 gives 600 + 500 + ⌈400 × 0.1⌉ = 1140.
 *
 * Quotas compare the sum of `chargedTokens` with the key's limit.
 */
export function charge(usage: TokenUsage, pricing: ModelPricing): Charge {
  const cached = Math.min(Math.max(0, usage.cachedTokens), usage.inputTokens);
  const uncached = usage.inputTokens - cached;
  const inputPrice = nanoUsd(pricing.input);
  const cachedPrice = nanoUsd(pricing.cachedInput);
  const cachedCharged =
    inputPrice === 0n || cachedPrice >= inputPrice ? BigInt(cached) : ceilDiv(BigInt(cached) * cachedPrice, inputPrice);
  const costUsd =
    (uncached * pricing.input + cached * pricing.cachedInput + usage.outputTokens * pricing.output) / 1_000_000;
  return {
    totalTokens: usage.inputTokens + usage.outputTokens,
    chargedTokens: uncached + usage.outputTokens + Number(cachedCharged),
    costUsd,
  };
}

/** A cost in whole nano-USD, the unit stores sum costs in (so that many small costs add up exactly). */
export function costNanoUsd(costUsd: number): number {
  return Math.round(costUsd * Number(NANO));
}

/** A cost with at most `decimals` decimals (6: to the micro-USD), without trailing zeros (`0.25`, `0.000123`). */
export function formatCost(costUsd: number, decimals = 6): string {
  return costUsd.toFixed(decimals).replace(/\.?0+$/, '');
}

/**
 * Which usage to read back. Usage is summed per UTC day, so `from` and `to` select whole UTC days:
 * the day of `from` through the day of `to`, both included.
 */
export interface UsageQuery {
  /** One key's usage; every key's when absent (admin). */
  readonly keyId?: string;
  /** From the UTC day of this time on. */
  readonly from?: Date;
  /** Up to and including the UTC day of this time. */
  readonly to?: Date;
  /**
   * One row per model (rows carry `model`), per UTC day (rows carry `day`), per key id (rows carry
   * `key_id`), or per end user of each key (rows carry `key_id` and `end_user`, null for the requests
   * that named none).
   */
  readonly groupBy: 'model' | 'day' | 'key' | 'end_user';
}

/** The row field a grouping fills: `model`, `day`, `key_id`, `end_user` (and `team`, which the control plane sums). */
export type UsageGroupField = 'model' | 'day' | 'key_id' | 'team' | 'end_user';

/** The row field that names a row's group. */
export function groupField(groupBy: UsageQuery['groupBy'] | 'team'): UsageGroupField {
  return groupBy === 'key' ? 'key_id' : groupBy;
}

/** The row fields that name a row's group, in order (an end user's row: its key id, then the end user). */
export function groupFields(groupBy: UsageQuery['groupBy'] | 'team'): UsageGroupField[] {
  return groupBy === 'end_user' ? ['key_id', 'end_user'] : [groupField(groupBy)];
}

/**
 * One row of the read-back: the sums over a model (`model` set), over a UTC day (`day` set, all
 * models together), over a key (`key_id` set) or over a team (`team` set, null for keys in none), in the query's range.
 */
export type UsageRow = {
  model?: string;
  day?: string;
  key_id?: string;
  team?: string | null;
  end_user?: string | null;
  cost_usd: number;
  saved_usd: number;
} & Omit<UsageTotals, 'cost_nano_usd' | 'saved_nano_usd'>;

/** A usage row's counters, in the order the CSV, the CLI's table and the API's schema list them. */
export const USAGE_COUNT_FIELDS = [
  'requests',
  'input_tokens',
  'output_tokens',
  'cached_tokens',
  'total_tokens',
  'charged_tokens',
  'cost_usd',
  'cache_hits',
  'saved_usd',
] as const;

/**
 * Daily totals of one key and model: the unit both stores keep and sum from. The stores keep daily totals
 * per key and end user too, as cells with `endUser` set (null: the requests that named none) and `model`
 * empty, which only the grouping per end user reads.
 */
export interface UsageCell {
  readonly keyId: string;
  readonly day: string;
  readonly model: string;
  readonly endUser?: string | null;
  readonly totals: UsageTotals;
}

/** Where usage records go and are summed back from. */
export interface UsageStore {
  /**
   * Takes a record. Synchronous: never awaits, never throws, never delays a response. The record is
   * stored exactly once, even when its backend is away for a while or the process restarts.
   */
  record(record: UsageRecord): void;
  /** Totals in a day range, per model, per day or per key id, sorted by that field. */
  query(query: UsageQuery): Promise<UsageRow[]>;
  /** Resolves once every record taken so far is stored (or safely spilled to disk). */
  flush(): Promise<void>;
  close(): Promise<void>;
  /** False while records wait for an unreachable backend. */
  readonly healthy: boolean;
}

/** The inclusive UTC day range a query selects (either end may be open). */
export function dayRange(query: Pick<UsageQuery, 'from' | 'to'>): { fromDay?: string; toDay?: string } {
  return { fromDay: query.from && dayOf(query.from), toDay: query.to && dayOf(query.to) };
}

export function inRange(day: string, fromDay?: string, toDay?: string): boolean {
  return (!fromDay || day >= fromDay) && (!toDay || day <= toDay);
}

/**
 * Groups daily cells into the rows a query asks for, sorted by model, day or key id (per end user: by key
 * id, then end user, the requests that named none last). Per end user, give the end-user cells.
 */
export function groupCells(cells: Iterable<UsageCell>, query: UsageQuery): UsageRow[] {
  const { fromDay, toDay } = dayRange(query);
  const groups = new Map<string, UsageTotals>();
  const names = new Map<string, Partial<UsageRow>>();
  for (const cell of cells) {
    if (query.keyId !== undefined && cell.keyId !== query.keyId) continue;
    if (!inRange(cell.day, fromDay, toDay)) continue;
    let group: string;
    if (query.groupBy === 'end_user') {
      // A tab sorts before every character an end user may hold but the controls; `\u{10FFFF}` puts none last.
      group = `${cell.keyId}\t${cell.endUser ?? '\u{10FFFF}'}`;
      if (!names.has(group)) names.set(group, { key_id: cell.keyId, end_user: cell.endUser ?? null });
    } else {
      group = query.groupBy === 'model' ? cell.model : query.groupBy === 'key' ? cell.keyId : cell.day;
    }
    groups.set(group, addTotals(groups.get(group) ?? emptyTotals(), cell.totals));
  }
  return [...groups.entries()]
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    .map(([group, totals]) => {
      const { cost_nano_usd: nano, saved_nano_usd: saved, cache_hits: hits, ...counts } = totals;
      const named = names.get(group) ?? { [groupField(query.groupBy)]: group };
      return { ...named, ...counts, cost_usd: nano / 1e9, cache_hits: hits, saved_usd: saved / 1e9 } as UsageRow;
    });
}

/** Parses a stored hash of totals (Redis returns strings). */
export function totalsFromHash(hash: Record<string, string>): UsageTotals {
  const totals = emptyTotals();
  for (const field of TOTAL_FIELDS) totals[field] = Number(hash[field] ?? 0);
  return totals;
}
