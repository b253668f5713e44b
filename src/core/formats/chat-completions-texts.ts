import type { Json } from './event-data.ts';
import { addText, itemsOf, NO_EVENT_TEXTS, type DeltaSlot, type EventTexts, type TextRules, type TextSlot } from './text-slots.ts';

/** Roles whose messages are the client's own words (the assistant's earlier turns are the model's). */
const CLIENT_ROLES = new Set(['system', 'developer', 'user', 'tool', 'function']);
/** Text fields of a message or a delta. */
const MESSAGE_FIELDS = ['content', 'refusal', 'reasoning_content', 'reasoning'] as const;

/** A message's `content`: the string, or each text part's `text`. */
function contentTexts(message: Json, path: readonly (string | number)[], into: TextSlot[]): void {
  if (typeof message.content === 'string') addText(into, message, path, 'content');
  else itemsOf(message.content).forEach((part, index) => addText(into, part, [...path, 'content', index], 'text'));
}

/** Text, refusal, reasoning and tool-call arguments of a message (an answer's) or a delta (a chunk's), each with a channel name. */
function messageTexts(message: unknown, path: readonly (string | number)[], into: (TextSlot & { channel: string })[], group: string): void {
  if (typeof message !== 'object' || message === null) return;
  const fields = message as Json;
  const push = (container: unknown, at: readonly (string | number)[], key: string, what: string) => {
    const found: TextSlot[] = [];
    addText(found, container, at, key);
    for (const slot of found) into.push({ ...slot, channel: `${group}|${what}` });
  };
  for (const field of MESSAGE_FIELDS) push(fields, path, field, field);
  push(fields.function_call, [...path, 'function_call'], 'arguments', 'function_call');
  itemsOf(fields.tool_calls).forEach((call, index) => {
    push((call as Json | null)?.function, [...path, 'tool_calls', index, 'function'], 'arguments', `tool ${String((call as Json | null)?.index ?? index)}`);
  });
}

function request(body: Record<string, unknown>): TextSlot[] {
  const slots: TextSlot[] = [];
  itemsOf(body.messages).forEach((message, index) => {
    if (typeof message === 'object' && message !== null && CLIENT_ROLES.has((message as Json).role)) contentTexts(message as Json, ['messages', index], slots);
  });
  return slots;
}

function answer(body: unknown): TextSlot[] {
  const slots: (TextSlot & { channel: string })[] = [];
  itemsOf((body as Json | null)?.choices).forEach((choice, index) => messageTexts((choice as Json | null)?.message, ['choices', index, 'message'], slots, `choice ${index}`));
  return slots;
}

/** Deltas per choice and field (content, refusal, reasoning, each tool call's arguments); a choice with a `finish_reason` ends its group. */
function event(payload: Json): EventTexts {
  if (!Array.isArray(payload.choices)) return NO_EVENT_TEXTS;
  const deltas: DeltaSlot[] = [];
  const closes: string[] = [];
  payload.choices.forEach((choice: unknown, position) => {
    if (typeof choice !== 'object' || choice === null) return;
    const group = `choice ${String((choice as Json).index ?? position)}`;
    messageTexts((choice as Json).delta, ['choices', position, 'delta'], deltas, group);
    if (typeof (choice as Json).finish_reason === 'string') closes.push(group);
  });
  return deltas.length || closes.length ? { deltas, wholes: [], closes } : NO_EVENT_TEXTS;
}

/** Chat Completions: `messages[].content` of the client's roles; `choices[].message` / `choices[].delta`. */
export const chatCompletionsTexts: TextRules = { request, answer, event };

