import type { SseEvent } from '../../plugins/plugin-contract.ts';

/** Helpers the wire format modules share for reading event data and usage counts. */

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- wire JSON is read field by field, each checked
export type Json = Record<string, any>;

export const isObject = (value: unknown): value is Record<string, unknown> =>
  typeof value === 'object' && value !== null;

/** The JSON object (or array) in `data`, or `undefined` when it is not JSON or not an object. */
export function parseObject(data: string): Json | undefined {
  try {
    const value: unknown = JSON.parse(data);
    return isObject(value) ? (value as Json) : undefined;
  } catch {
    return undefined;
  }
}

/** A token count as recorded: a finite positive number, rounded; anything else is 0. */
export const count = (value: unknown): number =>
  typeof value === 'number' && Number.isFinite(value) && value > 0 ? Math.round(value) : 0;

/** A string value, or `''`. */
export const text = (value: unknown): string => (typeof value === 'string' ? value : '');

/**
 * Whether JSON text has a `"usage"` key whose value is an object: a cheap scan, so that the chunks
 * of a stream without usage (`"usage":null`, or none at all) are never parsed.
 */
export function hasUsageObject(data: string): boolean {
  for (let at = data.indexOf('"usage"'); at !== -1; at = data.indexOf('"usage"', at + 7)) {
    let index = at + 7;
    while (isBlank(data.charCodeAt(index))) index += 1;
    if (data.charCodeAt(index) !== 0x3a /* : */) continue;
    index += 1;
    while (isBlank(data.charCodeAt(index))) index += 1;
    if (data.charCodeAt(index) === 0x7b /* { */) return true;
  }
  return false;
}

const isBlank = (code: number): boolean => code === 0x20 || code === 0x0a || code === 0x0d || code === 0x09;

/** One SSE event, optionally named; JSON.stringify never emits a raw line break, so the payload is one `data:` line. */
export function sseEvent(name: string | undefined, payload: unknown): Buffer {
  return Buffer.from(`${name ? `event: ${name}\n` : ''}data: ${JSON.stringify(payload)}\n\n`, 'utf8');
}

/**
 * Where the texts of a request, a JSON answer or a stream event sit, per wire format (each format's
 * `texts` rules, in its own `<format>-texts.ts`): what guardrails read, and rewrite in place.
 */
/** Keys and list indexes from a JSON value's top down to one of its members. */
export type JsonPath = readonly (string | number)[];

/** One text of a body: where it is, and what it says. */
export interface TextSlot {
  readonly path: JsonPath;
  readonly text: string;
  /** The text is JSON text (tool-call arguments): matched with its escapes undone, rewritten JSON-escaped. */
  readonly json?: boolean;
  /** The text is the name of the member at `path` (a property name in a schema), not its value. */
  readonly key?: boolean;
}

/**
 * One text delta of a stream event, continuing its channel's text (`<group>|<what>`: a choice's content, a content
 * block, an output part).
 */
export interface DeltaSlot extends TextSlot {
  readonly channel: string;
}

/** The texts one stream event carries. */
export interface EventTexts {
  /** Text deltas, each continuing its channel's text. */
  readonly deltas: readonly DeltaSlot[];
  /**
   * Whole texts: a part's or an item's full text, sent again as it ends (Responses' `*.done`, `response.completed`).
   */
  readonly wholes: readonly TextSlot[];
  /** The groups whose channels the event ends (every channel named `<group>|…`). */
  readonly closes: readonly string[];
}

/** Where a wire format keeps its texts. Each reads a parsed value and copies nothing; every path leads to a string. */
export interface TextRules {
  /**
   * The texts of a request the model reads, every role's turns (the client writes the whole history),
   * tools and schemas included: read by the format's list of request fields (`<format>-texts.ts`).
   */
  readonly request: (body: Record<string, unknown>) => TextSlot[];
  /** The texts of a JSON answer: message text, refusals, reasoning, tool-call arguments. */
  readonly answer: (body: unknown) => TextSlot[];
  /** The texts of one parsed stream event. */
  readonly event: (payload: Json) => EventTexts;
  /**
   * Whether a JSON answer or an event is in a shape of the format (its texts are where `answer` and
   * `event` look): one that is not may keep text anywhere, and is read whole (see {@link answerTexts}).
   */
  readonly knows: (value: unknown) => boolean;
}

export const NO_EVENT_TEXTS: EventTexts = { deltas: [], wholes: [], closes: [] };

const isJson = (value: unknown): value is Json => typeof value === 'object' && value !== null;

/** The value at `path`, or undefined. */
export function valueAt(root: unknown, path: JsonPath): unknown {
  let value = root;
  for (const key of path) {
    if (!isJson(value)) return undefined;
    value = (value as Record<string | number, unknown>)[key];
  }
  return value;
}

/** Sets the value at `path` (whose parent exists). */
export function setValueAt(root: unknown, path: JsonPath, value: unknown): void {
  const parent = valueAt(root, path.slice(0, -1));
  if (isJson(parent)) (parent as Record<string | number, unknown>)[path[path.length - 1]!] = value;
}

/**
 * Sets a slot's text: the string at its path, or (a key slot) the name of its member, the members kept in
 * order. Slots are read values first, then their member's name, so setting them in that order finds each.
 */
export function setTextAt(root: unknown, slot: Pick<TextSlot, 'path' | 'key'>, text: string): void {
  if (!slot.key) return setValueAt(root, slot.path, text);
  const parent = valueAt(root, slot.path.slice(0, -1));
  const name = slot.path[slot.path.length - 1]!;
  if (!isJson(parent) || Array.isArray(parent) || !Object.hasOwn(parent, name)) return;
  const object = parent as Record<string, unknown>;
  const members = Object.entries(object);
  for (const [member] of members) delete object[member];
  for (const [member, value] of members) object[member === String(name) ? text : member] = value;
}

/** Adds a slot for `container[key]` when it is a non-empty string. */
export function addText(into: TextSlot[], container: unknown, path: JsonPath, key: string | number): void {
  if (
    isJson(container) &&
    typeof (container as Record<string | number, unknown>)[key] === 'string' &&
    (container as Record<string | number, unknown>)[key] !== ''
  ) {
    into.push({ path: [...path, key], text: (container as Record<string | number, string>)[key]! });
  }
}

/**
 * Every non-empty string inside a JSON value (a schema, a tool's input object) and every member's name,
 * with its path: a member's value before its name (so that rewriting them in order finds each).
 */
export function stringLeaves(value: unknown, path: JsonPath, into: TextSlot[]): void {
  if (typeof value === 'string') {
    if (value !== '') into.push({ path, text: value });
  } else if (Array.isArray(value)) value.forEach((item, index) => stringLeaves(item, [...path, index], into));
  else if (isJson(value)) {
    for (const [key, item] of Object.entries(value)) {
      stringLeaves(item, [...path, key], into);
      if (key !== '') into.push({ path: [...path, key], text: key, key: true });
    }
  }
}

/** A list's items, or none. */
export const itemsOf = (value: unknown): unknown[] => (Array.isArray(value) ? value : []);

/**
 * The texts of a JSON answer: where the format keeps them, or every string in it (names included) when
 * the answer is in a shape the format does not read, so that text there is not left unchecked.
 */
export function answerTexts(rules: TextRules, body: unknown): TextSlot[] {
  const slots = rules.answer(body);
  if (slots.length > 0 || body === undefined || rules.knows(body)) return slots;
  const all: TextSlot[] = [];
  stringLeaves(body, [], all);
  return all;
}

/**
 * The texts of one event: where the format keeps them, or every string in it (whole) when the format does not know its
 * shape.
 */
export function eventTexts(rules: TextRules, payload: Json): EventTexts {
  const texts = rules.event(payload);
  if (texts.deltas.length > 0 || texts.wholes.length > 0 || rules.knows(payload)) return texts;
  const wholes: TextSlot[] = [];
  stringLeaves(payload, [], wholes);
  return wholes.length > 0 ? { deltas: [], wholes, closes: [] } : texts;
}

/** What a trace reads of an upstream's answer beside its usage: the model that answered, its id, why it stopped. */
export interface AnswerFacts {
  model?: string;
  id?: string;
  finishReasons?: string[];
}

/** A message in the GenAI conventions' shape (`gen_ai.input.messages`): a role and its parts. */
export interface GenAiMessage {
  readonly role: string;
  readonly parts: readonly Record<string, unknown>[];
}

/**
 * What the GenAI conventions read of a wire format: the facts of a whole answer and of a stream, event
 * by event (only for a request whose trace records), and, for operators who opted in to message
 * capture, the prompt and the answer's text.
 */
export interface GenAiRules {
  /** Adds the facts of a whole JSON answer. */
  readonly fromBody: (body: unknown, facts: AnswerFacts) => void;
  /** Adds what one streamed event says; cheap for events that carry none of it (no parse). */
  readonly fromStreamEvent: (event: SseEvent, facts: AnswerFacts) => void;
  /** The generated text of a whole JSON answer. */
  readonly answerText: (body: unknown) => string;
  /** The request's system instructions and messages. */
  readonly inputMessages: (body: Record<string, unknown>) => {
    readonly system?: readonly Record<string, unknown>[];
    readonly messages: readonly GenAiMessage[];
  };
}

/** Sets the answer's model and id once (the first event that names them). */
export function noteModel(facts: AnswerFacts, source: Json | undefined): void {
  if (!source) return;
  if (facts.model === undefined && typeof source.model === 'string') facts.model = source.model;
  if (facts.id === undefined && typeof source.id === 'string') facts.id = source.id;
}

/** Adds a finish reason (a string), once each. */
export function noteFinish(facts: AnswerFacts, reason: unknown): void {
  if (typeof reason !== 'string' || reason === '') return;
  const reasons = (facts.finishReasons ??= []);
  if (!reasons.includes(reason)) reasons.push(reason);
}

/**
 * A message's content as the conventions' parts: a string is one text part; a list keeps its text
 * parts' text and names the type of the others (images, files, tool blocks) without their data.
 */
export function contentParts(content: unknown): Record<string, unknown>[] {
  if (typeof content === 'string') return [{ type: 'text', content }];
  if (!Array.isArray(content)) return [];
  return content.map((part: unknown) => {
    if (!isObject(part)) return { type: 'unknown' };
    const type = text(part.type) || 'unknown';
    if (type === 'text' || type === 'input_text' || type === 'output_text')
      return { type: 'text', content: text(part.text) };
    if (type === 'tool_use') return { type: 'tool_call', id: part.id, name: part.name, arguments: part.input };
    if (type === 'tool_result') return { type: 'tool_call_response', id: part.tool_use_id, response: part.content };
    return { type };
  });
}

/** A list of `{ role, content }` messages as the conventions' messages. */
export function roleMessages(messages: unknown): GenAiMessage[] {
  if (!Array.isArray(messages)) return [];
  return messages.filter(isObject).map((message) => {
    const parts = contentParts(message.content);
    for (const call of Array.isArray(message.tool_calls) ? (message.tool_calls as Json[]) : []) {
      parts.push({ type: 'tool_call', id: call?.id, name: call?.function?.name, arguments: call?.function?.arguments });
    }
    return { role: text(message.role) || 'user', parts };
  });
}
