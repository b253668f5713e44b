import { type Json, stringLeaves, type JsonPath, type TextSlot } from './format-reading.ts';

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
  readonly [path: string, reading: FieldReading, note?: string] | readonly [path: string, skip: 'skip', why: string];

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

interface Step {
  readonly step: FieldStep;
  readonly node: Node;
}

interface Node {
  /** The steps from here, by the member they name (`*`: every member). */
  readonly steps: Map<string, Step[]>;
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
  const root: Node = { steps: new Map() };
  for (const [path, reading] of fields) {
    if (reading === 'skip') continue;
    let node = root;
    for (const step of fieldSteps(path)) {
      let named = node.steps.get(step.name);
      if (!named) node.steps.set(step.name, (named = []));
      const where = step.where?.join('=');
      const same = (candidate: Step) => candidate.step.each === step.each && candidate.step.where?.join('=') === where;
      let next = named.find(same);
      if (!next) named.push((next = { step, node: { steps: new Map() } }));
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
  if (node.steps.size === 0 || !isObject(value)) return;
  // The body's own members, each looked up among the steps (a message has a few members, its format many fields).
  const every = node.steps.get('*');
  for (const name in value) {
    const named = node.steps.get(name);
    if (named) for (let index = 0; index < named.length; index++) member(value, name, named[index]!, path, into);
    if (every) for (let index = 0; index < every.length; index++) member(value, name, every[index]!, path, into);
  }
}

/** Follows one step into the member `name` of `value` (each of its items, for a list step). */
function member(value: Json, name: string, { step, node: next }: Step, path: JsonPath, into: TextSlot[]): void {
  const found = value[name];
  if (found === undefined) return;
  if (!step.each) {
    if (kept(step, found)) visit(found, [...path, name], next, into);
  } else if (Array.isArray(found)) {
    for (let index = 0; index < found.length; index++) {
      if (kept(step, found[index])) visit(found[index], [...path, name, index], next, into);
    }
  }
}

function read(value: unknown, path: JsonPath, reading: FieldReading, into: TextSlot[]): void {
  if (typeof value === 'string') {
    if (value !== '') into.push(reading === 'json' ? { path, text: value, json: true } : { path, text: value });
  } else if (reading !== 'text') stringLeaves(value, path, into);
}
