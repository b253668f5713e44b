import type { SseEvent, TokenUsage, UsageExtractor } from '../../src/plugins/plugin-contract.ts';

const count = (value: unknown) =>
  typeof value === 'number' && Number.isFinite(value) && value >= 0 ? value : undefined;
const field = (value: unknown, key: string): unknown =>
  typeof value === 'object' && value !== null ? (value as Record<string, unknown>)[key] : undefined;

/**
 * Normalises one `usage` object of this upstream. It counts thinking tokens only in `total_tokens`
 * (so prompt + completion < total) yet bills them as output: output is what the total holds beyond the
 * prompt whenever that exceeds `completion_tokens`. `cached_tokens` is part of `prompt_tokens`;
 * missing or null details count 0.
 */
export function gammaTokens(usage: unknown): TokenUsage | undefined {
  const input = count(field(usage, 'prompt_tokens'));
  if (input === undefined) return undefined;
  const completion = count(field(usage, 'completion_tokens')) ?? 0;
  const total = count(field(usage, 'total_tokens')) ?? input + completion;
  return {
    inputTokens: input,
    outputTokens: Math.max(completion, total - input),
    cachedTokens: count(field(field(usage, 'prompt_tokens_details'), 'cached_tokens')) ?? 0,
  };
}

/**
 * The upstream repeats running usage totals on every stream chunk, with or without `include_usage`:
 * each one replaces the last, never adds to it (summing would count the stream many times over).
 */
export const gammaUsage: UsageExtractor = {
  fromBody: (body) => gammaTokens(field(body, 'usage')),
  fromStreamEvent: (seen: TokenUsage | undefined, event: SseEvent) => {
    if (!event.data.includes('"usage"')) return seen;
    try {
      return gammaTokens(field(JSON.parse(event.data), 'usage')) ?? seen;
    } catch {
      return seen;
    }
  },
};
