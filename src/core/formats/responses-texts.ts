import type { Json } from './event-data.ts';
import { addText, itemsOf, NO_EVENT_TEXTS, type EventTexts, type TextRules, type TextSlot } from './text-slots.ts';

/** Roles whose input items are the client's own words (the assistant's earlier output is the model's). */
const CLIENT_ROLES = new Set(['system', 'developer', 'user']);
/** Streamed deltas that are not text (base64 audio). */
const NOT_TEXT = new Set(['response.audio.delta']);

/** An item's `content` (or a tool output's `output`): the string, or each part's `text`. */
function partsOf(container: Json, key: string, path: readonly (string | number)[], into: TextSlot[]): void {
  if (typeof container[key] === 'string') addText(into, container, path, key);
  else itemsOf(container[key]).forEach((part, index) => addText(into, part, [...path, key, index], 'text'));
}

/** `instructions`, an `input` string, and the client's input items: messages of its roles and tool outputs. */
function request(body: Record<string, unknown>): TextSlot[] {
  const slots: TextSlot[] = [];
  addText(slots, body, [], 'instructions');
  if (typeof body.input === 'string') addText(slots, body, [], 'input');
  else itemsOf(body.input).forEach((item, index) => {
    const fields = item as Json | null;
    if (!fields || typeof fields !== 'object') return;
    if (CLIENT_ROLES.has(fields.role)) partsOf(fields, 'content', ['input', index], slots);
    else if (typeof fields.type === 'string' && fields.type.endsWith('_call_output')) partsOf(fields, 'output', ['input', index], slots);
  });
  return slots;
}

/** An output item's texts: a message's output text and refusals, a tool call's arguments or input, a reasoning summary. */
function itemTexts(item: unknown, path: readonly (string | number)[], into: TextSlot[]): void {
  const fields = item as Json | null;
  if (!fields || typeof fields !== 'object') return;
  itemsOf(fields.content).forEach((part, index) => {
    addText(into, part, [...path, 'content', index], 'text');
    addText(into, part, [...path, 'content', index], 'refusal');
  });
  itemsOf(fields.summary).forEach((part, index) => addText(into, part, [...path, 'summary', index], 'text'));
  addText(into, fields, path, 'arguments');
  addText(into, fields, path, 'input');
}

function answer(body: unknown): TextSlot[] {
  const slots: TextSlot[] = [];
  itemsOf((body as Json | null)?.output).forEach((item, index) => itemTexts(item, ['output', index], slots));
  return slots;
}

/** A delta's or done event's group: its kind, item and part (`response.output_text msg_1 0`). */
const groupOf = (kind: string, payload: Json): string => `${kind} ${String(payload.item_id ?? payload.output_index)} ${String(payload.content_index ?? payload.summary_index ?? '')}`;

/**
 * `*.delta` events with a string `delta` (output text, arguments, reasoning summaries; not audio), one
 * channel per item and part; a `*.done` ends its group and repeats the whole text, as do
 * `content_part`, `output_item` and the response's own events.
 */
function event(payload: Json): EventTexts {
  const type = payload.type;
  if (typeof type !== 'string') return NO_EVENT_TEXTS;
  if (type.endsWith('.delta')) {
    if (NOT_TEXT.has(type) || typeof payload.delta !== 'string' || payload.delta === '') return NO_EVENT_TEXTS;
    return { deltas: [{ path: ['delta'], text: payload.delta, channel: `${groupOf(type.slice(0, -'.delta'.length), payload)}|text` }], wholes: [], closes: [] };
  }
  const wholes: TextSlot[] = [];
  for (const key of ['text', 'arguments', 'refusal']) addText(wholes, payload, [], key);
  if (payload.part !== undefined) {
    addText(wholes, payload.part, ['part'], 'text');
    addText(wholes, payload.part, ['part'], 'refusal');
  }
  if (payload.item !== undefined) itemTexts(payload.item, ['item'], wholes);
  itemsOf((payload.response as Json | null)?.output).forEach((item, index) => itemTexts(item, ['response', 'output', index], wholes));
  const closes = type.endsWith('.done') ? [groupOf(type.slice(0, -'.done'.length), payload)] : [];
  return wholes.length || closes.length ? { deltas: [], wholes, closes } : NO_EVENT_TEXTS;
}

/** Responses: `instructions` and the client's input items; output items and their streamed deltas. */
export const responsesTexts: TextRules = { request, answer, event };
