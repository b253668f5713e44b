import type { RouteId } from '../plugins/plugin-contract.ts';

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
  readonly inputTokens: number;
  readonly outputTokens: number;
  readonly cachedTokens: number;
  readonly totalTokens: number;
  readonly chargedTokens: number;
  readonly costUsd: number;
  /** True when the upstream reported no usage and the figures come from the tokenizer. */
  readonly estimated: boolean;
}

/** Sums over a group of records, as the read-back API returns them. */
export interface UsageTotals {
  requests: number;
  input_tokens: number;
  output_tokens: number;
  cached_tokens: number;
  total_tokens: number;
  charged_tokens: number;
  /** Kept in nano-USD while summing so that many small costs add up exactly. */
  cost_nano_usd: number;
}

export const TOTAL_FIELDS = ['requests', 'input_tokens', 'output_tokens', 'cached_tokens', 'total_tokens', 'charged_tokens', 'cost_nano_usd'] as const;

export function emptyTotals(): UsageTotals {
  return { requests: 0, input_tokens: 0, output_tokens: 0, cached_tokens: 0, total_tokens: 0, charged_tokens: 0, cost_nano_usd: 0 };
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
    cost_nano_usd: Math.round(record.costUsd * 1e9),
  };
}

export function addTotals(into: UsageTotals, add: UsageTotals): UsageTotals {
  for (const field of TOTAL_FIELDS) into[field] += add[field];
  return into;
}

/** The UTC day (`YYYY-MM-DD`) a record is summed under. */
export function dayOf(time: string | Date): string {
  return (typeof time === 'string' ? time : time.toISOString()).slice(0, 10);
}
