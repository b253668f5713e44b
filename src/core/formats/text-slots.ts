/**
 * Where the texts of a request, a JSON answer or a stream event sit, per wire format (each format's
 * `texts` rules, in its own `<format>-texts.ts`): what guardrails read, and rewrite in place.
 */

import type { Json } from './event-data.ts';

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
