import type { TokenUsage } from '../plugins/plugin-contract.ts';

type Counter = (text: string) => number;
let counter: Promise<Counter> | undefined;

/** The tokenizer is loaded on first use: most requests report usage and never need it. */
function loadCounter(): Promise<Counter> {
  counter ??= import('gpt-tokenizer/encoding/o200k_base').then((module) => (text: string) => module.countTokens(text));
  return counter;
}

const PROMPT_FIELDS = ['system', 'instructions', 'messages', 'input', 'prompt', 'tools'];
const SKIPPED_KEYS = new Set(['role', 'type', 'id', 'call_id', 'cache_control', 'model']);

/** Every string a prompt carries (message text, system, instructions, tool definitions). */
export function promptText(body: Record<string, unknown>): string {
  const parts: string[] = [];
  const walk = (value: unknown) => {
    if (typeof value === 'string') parts.push(value);
    else if (Array.isArray(value)) value.forEach(walk);
    else if (typeof value === 'object' && value !== null) {
      for (const [key, entry] of Object.entries(value)) if (!SKIPPED_KEYS.has(key)) walk(entry);
    }
  };
  for (const field of PROMPT_FIELDS) walk(body[field]);
  return parts.join('\n');
}

/**
 * Estimated usage for an answer whose usage never arrived (a stream cut short or without its usage
 * event), counted with a real tokenizer over what was sent and what was received.
 */
export async function estimateUsage(requestBody: Record<string, unknown>, responseText: string): Promise<TokenUsage> {
  const count = await loadCounter();
  return { inputTokens: count(promptText(requestBody)), outputTokens: responseText ? count(responseText) : 0, cachedTokens: 0 };
}
