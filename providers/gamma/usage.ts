import type { SseEvent, TokenUsage, UsageExtractor } from '../../src/plugins/plugin-contract.ts';

interface GammaUsage {
  prompt_tokens?: number;
  completion_tokens?: number;
  total_tokens?: number;
  prompt_tokens_details?: { cached_tokens?: number | null } | null;
}

/**
 * This upstream counts thinking tokens only in `total_tokens` (prompt + completion < total), and bills
 * them as output: output is what the total holds beyond the prompt.
 */
export function gammaTokens(usage: GammaUsage | null | undefined): TokenUsage | undefined {
  if (!usage || typeof usage.prompt_tokens !== 'number') return undefined;
  const input = usage.prompt_tokens;
  const completion = usage.completion_tokens ?? 0;
  const total = usage.total_tokens ?? input + completion;
  return { inputTokens: input, outputTokens: Math.max(completion, total - input), cachedTokens: usage.prompt_tokens_details?.cached_tokens ?? 0 };
}

/**
 * The upstream repeats running usage totals on every stream chunk, with or without `include_usage`:
 * each one replaces the last (summing them would count the stream many times over).
 */
export const gammaUsage: UsageExtractor = {
  fromBody: (body) => gammaTokens((body as { usage?: GammaUsage } | null)?.usage),
  fromStreamEvent: (seen: TokenUsage | undefined, event: SseEvent) => {
    if (!event.data.includes('"usage"')) return seen;
    try {
      return gammaTokens((JSON.parse(event.data) as { usage?: GammaUsage }).usage) ?? seen;
    } catch {
      return seen;
    }
  },
};
