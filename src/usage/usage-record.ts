import { randomUUID } from 'node:crypto';
import type { ModelPricing, RouteId, TokenUsage } from '../plugins/plugin-contract.ts';
import { charge, costNanoUsd } from './pricing.ts';
import type { GuardrailMark, UsageOutcome } from '../core/exchange.ts';

/** One request's usage, as stored and summed. */
export interface UsageRecord {
  /** Unique per request; a record is applied at most once, however often it is replayed. */
  readonly id: string;
  /** ISO time the request finished. */
  readonly time: string;
  readonly keyId: string;
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
