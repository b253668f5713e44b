import type { Json } from './event-data.ts';
import { addText, itemsOf, NO_EVENT_TEXTS, stringLeaves, type DeltaSlot, type EventTexts, type TextRules, type TextSlot } from './text-slots.ts';

/** `system`, or a block list's text blocks. */
function blockTexts(value: unknown, container: Json, key: string, path: readonly (string | number)[], into: TextSlot[]): void {
  if (typeof value === 'string') addText(into, container, path, key);
  else itemsOf(value).forEach((block, index) => {
    const at = [...path, key, index];
    addText(into, block, at, 'text');
    if ((block as Json | null)?.type === 'tool_result') blockTexts((block as Json).content, block as Json, 'content', at, into);
  });
}

/** The system prompt and the user's turns (text blocks and tool results); the assistant's earlier turns are the model's. */
function request(body: Record<string, unknown>): TextSlot[] {
  const slots: TextSlot[] = [];
  blockTexts(body.system, body, 'system', [], slots);
  itemsOf(body.messages).forEach((message, index) => {
    if ((message as Json | null)?.role === 'user') blockTexts((message as Json).content, message as Json, 'content', ['messages', index], slots);
  });
  return slots;
}

/** A content block's texts: text, thinking, and every string of a tool call's input. */
function contentBlock(block: unknown, path: readonly (string | number)[], into: TextSlot[]): void {
  addText(into, block, path, 'text');
  addText(into, block, path, 'thinking');
  if ((block as Json | null)?.input !== undefined) stringLeaves((block as Json).input, [...path, 'input'], into);
}

function answer(body: unknown): TextSlot[] {
  const slots: TextSlot[] = [];
  itemsOf((body as Json | null)?.content).forEach((block, index) => contentBlock(block, ['content', index], slots));
  return slots;
}

/**
 * `content_block_delta` text, JSON input and thinking (one channel per content block), the text a
 * `content_block_start` opens with; `content_block_stop` ends the block.
 */
function event(payload: Json): EventTexts {
  const group = `block ${String(payload.index)}`;
  if (payload.type === 'content_block_delta') {
    const deltas: DeltaSlot[] = [];
    for (const field of ['text', 'partial_json', 'thinking']) {
      const found: TextSlot[] = [];
      addText(found, payload.delta, ['delta'], field);
      for (const slot of found) deltas.push({ ...slot, channel: `${group}|text` });
    }
    return deltas.length ? { deltas, wholes: [], closes: [] } : NO_EVENT_TEXTS;
  }
  if (payload.type === 'content_block_start') {
    const found: TextSlot[] = [];
    addText(found, payload.content_block, ['content_block'], 'text');
    addText(found, payload.content_block, ['content_block'], 'thinking');
    const wholes: TextSlot[] = [];
    if ((payload.content_block as Json | null)?.input !== undefined) stringLeaves((payload.content_block as Json).input, ['content_block', 'input'], wholes);
    return found.length || wholes.length ? { deltas: found.map((slot) => ({ ...slot, channel: `${group}|text` })), wholes, closes: [] } : NO_EVENT_TEXTS;
  }
  if (payload.type === 'content_block_stop') return { deltas: [], wholes: [], closes: [group] };
  if (payload.type === 'message_start') {
    const wholes: TextSlot[] = [];
    itemsOf((payload.message as Json | null)?.content).forEach((block, index) => contentBlock(block, ['message', 'content', index], wholes));
    return wholes.length ? { deltas: [], wholes, closes: [] } : NO_EVENT_TEXTS;
  }
  return NO_EVENT_TEXTS;
}

/** Messages (and count_tokens, whose requests are Messages requests): `system` and the user's turns; content blocks. */
export const messagesTexts: TextRules = { request, answer, event };
