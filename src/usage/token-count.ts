type Counter = (text: string) => number;
let counter: Promise<Counter> | undefined;

const NO_SPECIAL_TOKENS = { disallowedSpecial: new Set<string>() };
/**
 * Words whose tokens the tokenizer remembers. Its default (100,000) grows to tens of megabytes on varied text; the
 * words that recur (the common ones) fit in far fewer.
 */
const MERGE_CACHE_WORDS = 10_000;

/**
 * Loads the tokenizer (o200k_base) and warms it up on ordinary and degenerate text. Loading blocks its
 * thread for over a second, so the gateway's estimates run on the tokenizer thread
 * ({@link TokenizerThread}), which calls this on its first count.
 */
export function loadTokenizer(): Promise<Counter> {
  // Text such as `<|endoftext|>` is counted as plain text, never refused.
  counter ??= import('gpt-tokenizer/encoding/o200k_base').then((module) => {
    module.setMergeCacheSize(MERGE_CACHE_WORDS);
    const count = (text: string) => (text ? module.countTokens(text, NO_SPECIAL_TOKENS) : 0);
    count('Warm up: the quick brown fox jumps over the lazy dog.');
    count('a'.repeat(DEFAULT_COUNT_BUDGET.sliceChars));
    return count;
  });
  return counter;
}

/** How much tokenizer work one count may do, and how it is spread over the event loop. */
export interface CountBudget {
  /**
   * Characters handed to the tokenizer at once (give or take the 32 it may move back to a whitespace). BPE is
   * superlinear on degenerate text (one character repeated), so slices stay short.
   */
  readonly sliceChars: number;
  /** Tokenizer time after which the count yields to the event loop. */
  readonly tickMs: number;
  /** Tokenizer time after which the count stops and extrapolates from what it counted. */
  readonly totalMs: number;
  /** Slices counted at most; longer text is sampled at evenly spread slices and extrapolated. */
  readonly maxSlices: number;
  readonly now: () => number;
}

export const DEFAULT_COUNT_BUDGET: CountBudget = {
  sliceChars: 512,
  tickMs: 4,
  totalMs: 40,
  maxSlices: 256,
  now: () => performance.now(),
};

const WHITESPACE = /\s/;

/**
 * A slice boundary near `position`: before a whitespace (where a token starts anyway) and never inside a surrogate
 * pair.
 */
function cutAt(text: string, position: number): number {
  if (position >= text.length) return text.length;
  for (let back = 0; back < 32 && position - back > 0; back += 1) {
    if (WHITESPACE.test(text[position - back]!)) return position - back;
  }
  const code = text.charCodeAt(position - 1);
  return code >= 0xd800 && code <= 0xdbff ? position - 1 : position;
}

const yieldToEventLoop = () => new Promise<void>((resolve) => setImmediate(resolve));

/**
 * The slices of `text` a bounded count looks at: the whole text in slices of about `sliceChars` (each
 * ending before a whitespace, never inside a surrogate pair), or, past `maxSlices`, that many evenly
 * spread over it. Cut where the text is (the serving thread), so that the tokenizer thread is handed at
 * most `maxSlices` slices however long the text.
 */
export function countedSlices(text: string, budget: CountBudget = DEFAULT_COUNT_BUDGET): string[] {
  if (!text) return [];
  if (text.length <= budget.sliceChars) return [text];
  const sliceCount = Math.ceil(text.length / budget.sliceChars);
  const visited = Math.min(sliceCount, budget.maxSlices);
  const slices: string[] = [];
  for (let visit = 0; visit < visited; visit += 1) {
    const index = visited === sliceCount ? visit : Math.floor((visit * sliceCount) / visited);
    const start = cutAt(text, index * budget.sliceChars);
    const end = cutAt(text, (index + 1) * budget.sliceChars);
    if (end > start) slices.push(text.slice(start, end));
  }
  return slices;
}

/**
 * Tokens of `text`, with bounded work whatever the text: the tokenizer sees at most `sliceChars` at a
 * time, the count yields to the event loop every `tickMs` of tokenizer time, and past `totalMs` or
 * `maxSlices` it extrapolates from the slices counted (evenly spread over the text). Exact up to slice
 * boundaries when the text is counted whole. `totalChars` (default: the text's length) scales the
 * result when `text` is only a sample of a longer text.
 */
export function countTokensBounded(
  count: Counter,
  text: string,
  totalChars = text.length,
  budget: CountBudget = DEFAULT_COUNT_BUDGET,
): Promise<number> {
  return countSlicesBounded(count, countedSlices(text, budget), totalChars, budget);
}

/**
 * Tokens of a text `totalChars` long, from its {@link countedSlices}: each slice counted in turn, yielding
 * every `tickMs` of tokenizer time, and extrapolated from what was counted by `totalMs`.
 */
export async function countSlicesBounded(
  count: Counter,
  slices: readonly string[],
  totalChars: number,
  budget: CountBudget = DEFAULT_COUNT_BUDGET,
): Promise<number> {
  let countedChars = 0;
  let countedTokens = 0;
  let spentMs = 0;
  let tickStart = budget.now();
  let tickSpent = 0;
  for (const [index, slice] of slices.entries()) {
    const before = budget.now();
    countedTokens += count(slice);
    const took = budget.now() - before;
    countedChars += slice.length;
    spentMs += took;
    tickSpent += took;
    if (spentMs >= budget.totalMs || index === slices.length - 1) break;
    if (tickSpent >= budget.tickMs || budget.now() - tickStart >= budget.tickMs) {
      await yieldToEventLoop();
      tickStart = budget.now();
      tickSpent = 0;
    }
  }
  if (countedChars === 0) return 0;
  return Math.round(countedChars === totalChars ? countedTokens : (countedTokens * totalChars) / countedChars);
}
