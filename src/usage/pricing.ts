import type { ModelPricing, TokenUsage } from '../plugins/plugin-contract.ts';

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
