import type { TextSample } from '../core/exchange.ts';
import type { TokenUsage } from '../plugins/plugin-contract.ts';
import { TokenizerThread } from './tokenizer-thread.ts';
import {
  countedSlices,
  countTokensBounded,
  DEFAULT_COUNT_BUDGET,
  loadTokenizer,
  type CountBudget,
} from './token-count.ts';

export { countedSlices, countTokensBounded, DEFAULT_COUNT_BUDGET, loadTokenizer, type CountBudget };

/** The request fields that carry prompt text, in every wire format. */
const PROMPT_FIELDS = ['system', 'instructions', 'messages', 'input', 'prompt', 'tools'];
/** Fields inside them that are not prompt text (identifiers, markers, opaque or binary payloads). */
const SKIPPED_KEYS = new Set([
  'role',
  'type',
  'id',
  'call_id',
  'tool_call_id',
  'tool_use_id',
  'cache_control',
  'model',
  'signature',
  'encrypted_content',
  'data',
  'media_type',
  'detail',
]);

/**
 * Every string a prompt carries: message contents (strings and text parts), system, instructions,
 * input, tool definitions and tool results. Images and other inline binary payloads (`data:` URLs,
 * base64 `data` fields) are left out.
 */
export function promptText(body: Record<string, unknown>): string {
  const parts: string[] = [];
  const walk = (value: unknown) => {
    if (typeof value === 'string') {
      if (!value.startsWith('data:')) parts.push(value);
    } else if (Array.isArray(value)) value.forEach(walk);
    else if (typeof value === 'object' && value !== null) {
      for (const [key, entry] of Object.entries(value)) if (!SKIPPED_KEYS.has(key)) walk(entry);
    }
  };
  for (const field of PROMPT_FIELDS) walk(body[field]);
  return parts.join('\n');
}

/**
 * Tokens a reservation assumes for one image part: about the most a provider bills for one image at
 * the sizes it accepts (larger images are scaled down before they are counted), whatever its URL.
 */
export const IMAGE_PART_TOKENS = 1600;
/** Content parts that carry an image, in the three wire formats. */
const IMAGE_PARTS = new Set(['image_url', 'image', 'input_image']);
/** Fields of a prompt a provider does not bill as input (identifiers, markers, signatures). */
const UNBILLED_KEYS = new Set([
  'role',
  'type',
  'id',
  'call_id',
  'tool_call_id',
  'tool_use_id',
  'cache_control',
  'model',
  'signature',
  'media_type',
  'detail',
  'file_id',
  'filename',
]);

/**
 * The characters a reservation's input estimate is made from, before the request is sent, without a
 * tokenizer: every string of the prompt fields (text, tool definitions and results, replayed reasoning),
 * each image part as {@link IMAGE_PART_TOKENS} tokens' worth, and any other inline payload (a `data:` URL,
 * base64 `data` of a document or audio) at its full length, which is more than any provider bills for it.
 */
export function promptCharacters(body: Readonly<Record<string, unknown>>): number {
  let chars = 0;
  const walk = (value: unknown): void => {
    if (typeof value === 'string') {
      chars += value.length;
    } else if (Array.isArray(value)) {
      for (const entry of value) walk(entry);
    } else if (typeof value === 'object' && value !== null) {
      const type = (value as { type?: unknown }).type;
      if (typeof type === 'string' && IMAGE_PARTS.has(type)) {
        chars += IMAGE_PART_TOKENS * 4;
        return;
      }
      for (const key in value) if (!UNBILLED_KEYS.has(key)) walk((value as Record<string, unknown>)[key]);
    }
  };
  for (const field of PROMPT_FIELDS) walk(body[field]);
  return chars;
}

/** Where the gateway's estimates are counted: off the serving thread, the tokenizer loaded on first need. */
export const tokenizerThread = new TokenizerThread();

/** Input tokens of a request body, counted with the tokenizer (bounded work, see {@link countTokensBounded}). */
export async function estimateInputTokens(requestBody: Record<string, unknown>): Promise<number> {
  return tokenizerThread.count(promptText(requestBody));
}

/** Output tokens of the text a stream delivered (see `streamedText`). */
export async function estimateOutputTokens(responseText: string | TextSample): Promise<number> {
  const sample = typeof responseText === 'string' ? { text: responseText, chars: responseText.length } : responseText;
  return tokenizerThread.count(sample.text, sample.chars);
}

/**
 * Estimated usage for an answer whose usage never arrived (a stream cut short, or one that ended
 * without its usage event): input from the request body, output from the streamed text, no cache.
 * The record made from it is flagged `estimated: true`. The work is bounded and done on the tokenizer
 * thread, so no text, however degenerate, holds other requests up.
 */
export async function estimateUsage(
  requestBody: Record<string, unknown>,
  responseText: string | TextSample,
): Promise<TokenUsage> {
  return {
    inputTokens: await estimateInputTokens(requestBody),
    outputTokens: await estimateOutputTokens(responseText),
    cachedTokens: 0,
  };
}
