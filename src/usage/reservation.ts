import type { Meter } from '../core/limits.ts';
import type { SettledFigures, Settlement } from '../core/exchange.ts';
import type { ModelPricing } from '../plugins/plugin-contract.ts';
import type { CounterChange, CounterDemand, LimitLedger } from './limit-ledger.ts';
import { costNanoUsd } from './usage-accounting.ts';

/**
 * The output cap assumed for a model whose plugin declares no `maxOutputTokens` and a request that sets
 * none: the upstream's own default output may be long, so this is generous rather than typical.
 */
export const DEFAULT_OUTPUT_CAP = 32_768;

/** What a request is expected to use, before it is sent: its input and at most this much output. */
export interface RequestEstimate {
  readonly inputTokens: number;
  readonly outputTokens: number;
}

/** Tokens a provider adds to any prompt for its framing (roles, separators), on top of its text. */
export const PROMPT_FRAMING_TOKENS = 8;

/**
 * A request's estimate from the size of its prompt text (see `promptCharacters`) and its output cap:
 * the input is a character count over four (the common rule of thumb for English text) plus the
 * framing, made without a tokenizer so admission stays cheap; settlement corrects it to the
 * provider's figures.
 */
export function estimateRequest(promptChars: number, outputCap: number, choices = 1): RequestEstimate {
  return {
    inputTokens: Math.ceil(promptChars / 4) + PROMPT_FRAMING_TOKENS,
    outputTokens: Math.max(0, Math.floor(outputCap)) * Math.max(1, Math.floor(choices)),
  };
}

/** The highest of each price over the models a request may be served by (the requested one and its fallbacks). */
export function highestPricing(pricings: readonly ModelPricing[]): ModelPricing {
  return pricings.reduce((high, pricing) => ({
    input: Math.max(high.input, pricing.input),
    cachedInput: Math.max(high.cachedInput, pricing.cachedInput),
    output: Math.max(high.output, pricing.output),
  }));
}

// USD per 1M tokens to nano-USD per token is a factor of 1000.
const nanoFor = (tokens: number, pricePerMillion: number): number =>
  Math.ceil(tokens * Math.max(0, pricePerMillion) * 1000);

/**
 * What a request asks of each meter: the whole estimate (input + output cap; for money, their price at
 * the highest prices it may be served at), all of which must be left, else it is refused: a
 * reservation never exceeds what remains, so what a limit serves stays within the documented bound.
 */
export function demandsFor(
  meters: readonly Meter[],
  estimate: RequestEstimate,
  pricing: ModelPricing,
): CounterDemand[] {
  const tokens = estimate.inputTokens + estimate.outputTokens;
  const wholeNano = nanoFor(estimate.inputTokens, pricing.input) + nanoFor(estimate.outputTokens, pricing.output);
  return meters.map((meter) => {
    // An end user's requests per minute are a meter of the same reservation: one request.
    const want = meter.kind === 'rpm' ? 1 : meter.kind === 'budget' ? wholeNano : tokens;
    return { counter: meter.counter, limit: meter.limit, want, need: want, resetAt: meter.resetAt };
  });
}

/**
 * What one admitted request holds on its meters until it settles: once, to the figures its usage
 * record stores (reported, or estimated for a cut answer), or to nothing when it failed without cost.
 */
export class Reservation implements Settlement {
  private state: 'open' | 'handed' | 'settled' = 'open';

  constructor(
    private readonly ledger: Pick<LimitLedger, 'adjust'>,
    readonly meters: readonly Meter[],
    readonly reserved: readonly number[],
  ) {}

  /** Usage accounting owns it from here: only {@link settle} ends it (after an estimate, maybe). */
  handOver(): void {
    if (this.state === 'open') this.state = 'handed';
  }

  /** Gives everything back, unless usage accounting took the reservation over. */
  release(): void {
    if (this.state === 'open') this.settle(undefined);
  }

  /** Ends the reservation: each meter moves from what it reserved to the record's figure of its kind. */
  settle(figures: SettledFigures | undefined): void {
    if (this.state === 'settled') return;
    this.state = 'settled';
    const changes: CounterChange[] = [];
    const costNano = figures ? costNanoUsd(figures.costUsd) : 0;
    this.meters.forEach((meter, index) => {
      // A request stays counted on a requests-per-minute meter, whatever it cost.
      if (meter.kind === 'rpm') return;
      const real = !figures
        ? 0
        : meter.kind === 'tpm'
          ? figures.totalTokens
          : meter.kind === 'quota'
            ? figures.chargedTokens
            : costNano;
      const delta = real - this.reserved[index]!;
      if (delta !== 0) changes.push({ counter: meter.counter, delta, resetAt: meter.resetAt });
    });
    if (changes.length > 0) this.ledger.adjust(changes);
  }
}
