import type { ModelPricing, TokenUsage } from '../plugins/plugin-contract.ts';

export interface Charge {
  readonly totalTokens: number;
  readonly chargedTokens: number;
  /** USD, from the model's prices per 1M tokens. */
  readonly costUsd: number;
}

/**
 * What one usage costs under a model's pricing.
 *
 * - `total_tokens` = input + output (input already includes cached tokens).
 * - `cost_usd` = ((input − cached) × input price + cached × cached-input price + output × output price) / 1M.
 * - `charged_tokens` = (input − cached) + output + ⌈cached × cached-input price / input price⌉: every
 *   token counts once, except cache reads, which count at their discount. It is the figure quotas
 *   are checked against.
 */
export function charge(usage: TokenUsage, pricing: ModelPricing): Charge {
  const cached = Math.min(usage.cachedTokens, usage.inputTokens);
  const uncached = usage.inputTokens - cached;
  const cachedWeight = pricing.input > 0 ? pricing.cachedInput / pricing.input : 0;
  const costUsd = (uncached * pricing.input + cached * pricing.cachedInput + usage.outputTokens * pricing.output) / 1_000_000;
  return {
    totalTokens: usage.inputTokens + usage.outputTokens,
    chargedTokens: uncached + usage.outputTokens + Math.ceil(cached * cachedWeight - 1e-9),
    costUsd,
  };
}
