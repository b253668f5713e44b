import type { TokenUsage } from '../plugins/plugin-contract.ts';

type Counter = (text: string) => number;
let counter: Promise<Counter> | undefined;

// Text past this length is extrapolated from its first part, so one huge body cannot hold the event
// loop for long (1M characters take about 20 ms to count).
const MAX_COUNTED_CHARS = 1_000_000;
const NO_SPECIAL_TOKENS = { disallowedSpecial: new Set<string>() };

/** The tokenizer (o200k_base) is loaded on first use: most requests report usage and never need it. */
function loadCounter(): Promise<Counter> {
  counter ??= import('gpt-tokenizer/encoding/o200k_base').then((module) => (text: string) => {
    if (!text) return 0;
    // Text such as `<|endoftext|>` is counted as plain text, never refused.
    if (text.length <= MAX_COUNTED_CHARS) return module.countTokens(text, NO_SPECIAL_TOKENS);
    const counted = module.countTokens(text.slice(0, MAX_COUNTED_CHARS), NO_SPECIAL_TOKENS);
    return Math.ceil((counted * text.length) / MAX_COUNTED_CHARS);
  });
  return counter;
}

/** The request fields that carry prompt text, in every wire format. */
const PROMPT_FIELDS = ['system', 'instructions', 'messages', 'input', 'prompt', 'tools'];
/** Fields inside them that are not prompt text (identifiers, markers, opaque or binary payloads). */
const SKIPPED_KEYS = new Set(['role', 'type', 'id', 'call_id', 'tool_call_id', 'tool_use_id', 'cache_control', 'model', 'signature', 'encrypted_content', 'data', 'media_type', 'detail']);

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

/** Input tokens of a request body, counted with the tokenizer. */
export async function estimateInputTokens(requestBody: Record<string, unknown>): Promise<number> {
  return (await loadCounter())(promptText(requestBody));
}

/** Output tokens of the text a stream delivered (see `streamedText`). */
export async function estimateOutputTokens(responseText: string): Promise<number> {
  return (await loadCounter())(responseText);
}

/**
 * Estimated usage for an answer whose usage never arrived (a stream cut short, or one that ended
 * without its usage event): input from the request body, output from the streamed text, no cache.
 * The record made from it is flagged `estimated: true`.
 */
export async function estimateUsage(requestBody: Record<string, unknown>, responseText: string): Promise<TokenUsage> {
  const count = await loadCounter();
  return { inputTokens: count(promptText(requestBody)), outputTokens: count(responseText), cachedTokens: 0 };
}
