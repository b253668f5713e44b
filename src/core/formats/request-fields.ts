import type { Json } from './event-data.ts';
import { stringLeaves, type JsonPath, type TextSlot } from './text-slots.ts';

/**
 * How guardrails read a field the model reads: `text`, the string there; `json`, JSON text (tool-call
 * arguments) matched with its escapes undone, or a JSON value read as `tree`; `tree`, a JSON value (a
 * schema, a tool call's input): every string in it and every member's name.
 */
export type FieldReading = 'text' | 'json' | 'tree';

/**
 * One field of a format's request, as its published definition has it, and what guardrails make of it:
 * `[path, reading]` (read), `[path, reading, note]` (read, though not in the published definition: the
 * note says where it comes from), or `[path, 'skip', why]` (the model does not read it as text).
 *
 * A path is dot-separated member names: `name[]` is each item of a list, `*` each member of an object,
 * and `{type=text}` after a step keeps only the objects whose `type` is `text`
 * (`messages[].content[].source{type=text}.data`). A skipped path leaves out everything below it.
 */
export type RequestField =
  | readonly [path: string, reading: FieldReading, note?: string]
  | readonly [path: string, skip: 'skip', why: string];

/** One step of a path: a member (or every member), each item of it when a list, only objects of one `type`. */
export interface FieldStep {
  readonly name: string;
  readonly each: boolean;
  readonly where?: readonly [key: string, value: string];
}

const STEP = /^([^[\]{}]+)(\[\])?(?:\{([^=}]+)=([^}]+)\})?$/;

/** The steps of a field's path. */
export function fieldSteps(path: string): FieldStep[] {
  return path.split('.').map((part) => {
    const match = STEP.exec(part);
    if (!match) throw new Error(`'${path}' is not a field path: '${part}'`);
    return {
      name: match[1]!,
      each: match[2] !== undefined,
      ...(match[3] ? { where: [match[3], match[4]!] as const } : {}),
    };
  });
}

interface Node {
  readonly steps: { readonly step: FieldStep; readonly node: Node }[];
  reading?: FieldReading;
}

const isObject = (value: unknown): value is Json =>
  typeof value === 'object' && value !== null && !Array.isArray(value);
const kept = (step: FieldStep, value: unknown) =>
  !step.where || (isObject(value) && value[step.where[0]] === step.where[1]);

/**
 * The texts a request's fields hold, read by a format's list: each field read is followed from the
 * body's top, one pass over what the list names (nothing else of the body is visited).
 */
export function requestTextReader(fields: readonly RequestField[]): (body: Record<string, unknown>) => TextSlot[] {
  const root: Node = { steps: [] };
  for (const [path, reading] of fields) {
    if (reading === 'skip') continue;
    let node = root;
    for (const step of fieldSteps(path)) {
      let next = node.steps.find(
        (candidate) =>
          candidate.step.name === step.name &&
          candidate.step.each === step.each &&
          candidate.step.where?.join('=') === step.where?.join('='),
      );
      if (!next) node.steps.push((next = { step, node: { steps: [] } }));
      node = next.node;
    }
    node.reading = reading;
  }
  return (body) => {
    const slots: TextSlot[] = [];
    visit(body, [], root, slots);
    return slots;
  };
}

function visit(value: unknown, path: JsonPath, node: Node, into: TextSlot[]): void {
  if (node.reading) read(value, path, node.reading, into);
  if (node.steps.length === 0 || !isObject(value)) return;
  for (const { step, node: next } of node.steps) {
    const names = step.name === '*' ? Object.keys(value) : [step.name];
    for (const name of names) {
      const member = value[name];
      if (member === undefined) continue;
      if (!step.each) {
        if (kept(step, member)) visit(member, [...path, name], next, into);
      } else if (Array.isArray(member)) {
        member.forEach((item, index) => {
          if (kept(step, item)) visit(item, [...path, name, index], next, into);
        });
      }
    }
  }
}

function read(value: unknown, path: JsonPath, reading: FieldReading, into: TextSlot[]): void {
  if (typeof value === 'string') {
    if (value !== '') into.push(reading === 'json' ? { path, text: value, json: true } : { path, text: value });
  } else if (reading !== 'text') stringLeaves(value, path, into);
}
