import type { WireFormat } from '../plugins/plugin-contract.ts';

type Json = Record<string, any>;

function parse(data: string): Json | undefined {
  try {
    const value: unknown = JSON.parse(data);
    return typeof value === 'object' && value !== null ? (value as Json) : undefined;
  } catch {
    return undefined;
  }
}

const text = (value: unknown): string => (typeof value === 'string' ? value : '');

/** The generated text (content, tool arguments, thinking) one streamed event adds, per wire format. */
export function streamedText(format: WireFormat, data: string): string {
  if (format === 'count-tokens') return '';
  const event = parse(data);
  if (!event) return '';
  if (format === 'chat-completions') {
    let out = '';
    for (const choice of (event.choices ?? []) as Json[]) {
      const delta = (choice.delta ?? {}) as Json;
      out += text(delta.content) + text(delta.reasoning_content) + text(delta.function_call?.arguments);
      for (const call of (delta.tool_calls ?? []) as Json[]) out += text(call.function?.name) + text(call.function?.arguments);
    }
    return out;
  }
  if (format === 'responses') {
    return typeof event.type === 'string' && event.type.endsWith('.delta') ? text(event.delta) : '';
  }
  if (event.type !== 'content_block_delta') return '';
  const delta = (event.delta ?? {}) as Json;
  return text(delta.text) + text(delta.partial_json) + text(delta.thinking);
}
