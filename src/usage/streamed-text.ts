import type { SseEvent, WireFormat } from '../plugins/plugin-contract.ts';

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

// Responses deltas that are not generated text (base64 audio).
const NOT_TEXT = new Set(['response.audio.delta']);

/**
 * The generated text one streamed event adds, per wire format, for estimates when a stream ends
 * without usage. Counted: Chat Completions `choices[].delta` content, reasoning, refusal and tool call
 * names and arguments; Responses `*.delta` events (output text, function arguments, reasoning
 * summaries); Messages `content_block_delta` text, tool input JSON and thinking.
 */
export function streamedText(format: WireFormat, event: SseEvent | string): string {
  if (format === 'count-tokens') return '';
  const payload = parse(typeof event === 'string' ? event : event.data);
  if (!payload) return '';
  if (format === 'chat-completions') {
    let out = '';
    for (const choice of Array.isArray(payload.choices) ? (payload.choices as Json[]) : []) {
      const delta = (choice?.delta ?? {}) as Json;
      out += text(delta.content) + text(delta.reasoning_content) + text(delta.reasoning) + text(delta.refusal) + text(delta.function_call?.name) + text(delta.function_call?.arguments);
      for (const call of Array.isArray(delta.tool_calls) ? (delta.tool_calls as Json[]) : []) out += text(call?.function?.name) + text(call?.function?.arguments);
    }
    return out;
  }
  if (format === 'responses') {
    return typeof payload.type === 'string' && payload.type.endsWith('.delta') && !NOT_TEXT.has(payload.type) ? text(payload.delta) : '';
  }
  if (payload.type !== 'content_block_delta') return '';
  const delta = (payload.delta ?? {}) as Json;
  return text(delta.text) + text(delta.partial_json) + text(delta.thinking);
}
