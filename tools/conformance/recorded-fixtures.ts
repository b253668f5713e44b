import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { isDeepStrictEqual } from 'node:util';
import { WIRE_FORMATS } from '../../src/core/formats/index.ts';
import { SseSplitter, FixupChain } from '../../src/data-plane/sse/sse-relay.ts';
import type {
  SseEvent,
  StreamFixupDeclaration,
  TokenUsage,
  UpstreamRouteId,
  WireFormat,
} from '../../src/plugins/plugin-contract.ts';

/**
 * An answer recorded from a real upstream, kept in a plugin's `__fixtures__/` folder under one base name:
 * - `<name>.fixture.json`: `{"route": "chat-completions", "model": "acme/acme-1", "stream"?: false, "usage"?: {...}}`,
 *   the route and the canonical model it was recorded from, whether it is a stream (the default) or a
 *   JSON answer (`"stream": false`), and the usage the plugin must read from it (`inputTokens`,
 *   `outputTokens`, `cachedTokens`; optional for a stream, required for a JSON answer);
 * - a stream: `<name>.chunks.txt`, the stream's events, one `data` payload a line, in order, or
 *   `<name>.sse`, the stream's bytes as the upstream sent them (its `event:` names kept: a vendor
 *   with its own format names its events); and `<name>.expected.txt` (optional), what clients of that
 *   model must receive once the plugin's stream fixups (or its route adapter) ran, one event's `data` a
 *   line (without it, a forwarded stream must pass unchanged);
 * - a JSON answer: `<name>.body.json`, the answer's body exactly as the upstream sent it, and, on an
 *   adapted route, `<name>.expected.json` (optional): the answer clients must receive.
 */
export type RecordedFixture = RecordedStream | RecordedBody;

interface RecordedAnswer {
  readonly name: string;
  readonly route: UpstreamRouteId;
  /** Canonical ID of the model the answer was recorded from. */
  readonly model: string;
  readonly usage?: TokenUsage;
}

/** A recorded stream (`<name>.chunks.txt`, or `<name>.sse`). */
export interface RecordedStream extends RecordedAnswer {
  readonly stream: true;
  /** Each event's data (of a `.sse` recording too). */
  readonly chunks: readonly string[];
  /** A `.sse` recording's bytes, as the upstream sent them. */
  readonly sse?: string;
  readonly expected?: readonly string[];
}

/** A recorded JSON answer (`<name>.body.json`), always with the usage the plugin must read from it. */
export interface RecordedBody extends RecordedAnswer {
  readonly stream: false;
  /** The body's text, as recorded. */
  readonly body: string;
  readonly usage: TokenUsage;
  /** What clients must receive (`<name>.expected.json`), on an adapted route. */
  readonly expected?: unknown;
}

const lines = (path: string) =>
  readFileSync(path, 'utf8')
    .split(/\r?\n/)
    .filter((line) => line.trim() !== '');

/**
 * Reads every fixture of a plugin folder. A malformed one throws naming its file and field, or, when
 * `problems` is given, is left out with that message pushed there (so the well-formed ones still count).
 */
export function readFixtures(pluginDirectory: string, problems?: string[]): RecordedFixture[] {
  const folder = join(pluginDirectory, '__fixtures__');
  if (!existsSync(folder)) return [];
  return readdirSync(folder)
    .filter((file) => file.endsWith('.fixture.json'))
    .sort()
    .flatMap((file) => {
      if (!problems) return [readFixture(folder, file)];
      try {
        return [readFixture(folder, file)];
      } catch (error) {
        problems.push((error as Error).message);
        return [];
      }
    });
}

/** One fixture, from its `<name>.fixture.json` file name; throws naming the file and field when malformed. */
function readFixture(folder: string, file: string): RecordedFixture {
  const name = file.slice(0, -'.fixture.json'.length);
  const path = join(folder, file);
  let meta: Record<string, unknown>;
  try {
    meta = JSON.parse(readFileSync(path, 'utf8')) as Record<string, unknown>;
  } catch (error) {
    throw new Error(`${path}: cannot be read as JSON: ${(error as Error).message}`);
  }
  if (typeof meta.route !== 'string') throw new Error(`${path}: route: must name the route the answer was recorded on`);
  if (typeof meta.model !== 'string' || !meta.model.includes('/'))
    throw new Error(`${path}: model: must be the canonical ID (vendor/model) it was recorded from`);
  if (meta.stream !== undefined && typeof meta.stream !== 'boolean')
    throw new Error(`${path}: stream: must be true (a stream, the default) or false (a JSON answer)`);
  const usage = meta.usage as Record<string, unknown> | undefined;
  if (
    usage !== undefined &&
    !['inputTokens', 'outputTokens', 'cachedTokens'].every((key) => typeof usage[key] === 'number')
  ) {
    throw new Error(`${path}: usage: must give inputTokens, outputTokens and cachedTokens`);
  }
  const chunksPath = join(folder, `${name}.chunks.txt`);
  const ssePath = join(folder, `${name}.sse`);
  const expectedPath = join(folder, `${name}.expected.txt`);
  const bodyPath = join(folder, `${name}.body.json`);
  const expectedBodyPath = join(folder, `${name}.expected.json`);
  const base = { name, route: meta.route as UpstreamRouteId, model: meta.model };
  if (meta.stream === false) {
    if (!existsSync(bodyPath))
      throw new Error(`${path}: ${name}.body.json is missing beside it ("stream": false: a recorded JSON answer)`);
    if (existsSync(chunksPath) || existsSync(ssePath) || existsSync(expectedPath)) {
      throw new Error(
        `${path}: "stream": false, yet ${name}.chunks.txt, ${name}.sse or ${name}.expected.txt is beside it (a JSON answer is ${name}.body.json)`,
      );
    }
    if (usage === undefined)
      throw new Error(`${path}: usage: a recorded JSON answer must give the usage the plugin must read from it`);
    const body = readFileSync(bodyPath, 'utf8');
    const json = (file: string, text: string) => {
      try {
        return JSON.parse(text) as unknown;
      } catch (error) {
        throw new Error(`${file}: cannot be read as JSON: ${(error as Error).message}`);
      }
    };
    json(bodyPath, body);
    const expected = existsSync(expectedBodyPath)
      ? json(expectedBodyPath, readFileSync(expectedBodyPath, 'utf8'))
      : undefined;
    return {
      ...base,
      stream: false,
      body,
      usage: usage as unknown as TokenUsage,
      ...(expected === undefined ? {} : { expected }),
    };
  }
  if (existsSync(chunksPath) === existsSync(ssePath)) {
    throw new Error(
      existsSync(ssePath)
        ? `${path}: both ${name}.chunks.txt and ${name}.sse are beside it: keep one recording`
        : `${path}: ${name}.chunks.txt (or ${name}.sse, the stream's bytes with its event names) is missing beside it (for a recorded JSON answer: "stream": false and ${name}.body.json)`,
    );
  }
  if (existsSync(bodyPath))
    throw new Error(
      `${path}: ${name}.body.json is beside a stream fixture (set "stream": false for a recorded JSON answer)`,
    );
  const sse = existsSync(ssePath) ? readFileSync(ssePath, 'utf8') : undefined;
  return {
    ...base,
    stream: true,
    chunks: sse === undefined ? lines(chunksPath) : decodeSse(Buffer.from(sse, 'utf8')),
    ...(sse === undefined ? {} : { sse }),
    expected: existsSync(expectedPath) ? lines(expectedPath) : undefined,
    usage: usage as TokenUsage | undefined,
  };
}

/** The recorded events as the upstream sent them; Messages and Responses name each event after its `type`. */
export function fixtureEvents(chunks: readonly string[], format: WireFormat): SseEvent[] {
  const rules = WIRE_FORMATS[format];
  return chunks.map((data) => {
    if (!rules.namesEventsByType) return { data };
    try {
      const type = (JSON.parse(data) as { type?: unknown }).type;
      return typeof type === 'string' ? { event: type, data } : { data };
    } catch {
      return { data };
    }
  });
}

/** The events as SSE bytes. */
export function encodeSse(events: readonly SseEvent[]): string {
  return events
    .map((event) => `${event.event === undefined ? '' : `event: ${event.event}\n`}data: ${event.data}\n\n`)
    .join('');
}

/** The `data` of every event of an SSE body. */
export function decodeSse(body: Buffer): string[] {
  const splitter = new SseSplitter();
  return splitter.push(body).flatMap((block) => (block.event ? [block.event.data] : []));
}

/**
 * The events after the fixups, as the contract says the relay applies them (in order, each with its
 * own state for this one stream; `null` or `[]` drops, a list puts out several).
 */
export function applyFixups(events: readonly SseEvent[], fixups: readonly StreamFixupDeclaration[]): string[] {
  const chain = new FixupChain(fixups);
  // Each event is a copy, so a fixup that edits in place cannot change the recording.
  return events.flatMap((original) => (chain.apply({ ...original }) ?? [original]).map((event) => event.data));
}

/**
 * A line diff of two event data lists, for a failure message: each differing event (up to `limit`) as
 * `event N` then `- expected` and `+ received` lines (`(none)` where one list is shorter).
 */
export function eventDiff(
  expected: readonly string[],
  received: readonly string[],
  limit = 5,
  instances = false,
): string {
  const lines: string[] = [];
  let shown = 0;
  let differing = 0;
  for (let index = 0; index < Math.max(expected.length, received.length); index += 1) {
    if (
      sameEvents([received[index] ?? ''], [expected[index] ?? ''], instances).same &&
      expected[index] !== undefined &&
      received[index] !== undefined
    )
      continue;
    differing += 1;
    if (shown === limit) continue;
    shown += 1;
    lines.push(
      `event ${index + 1}:`,
      `  - expected: ${expected[index] ?? '(none)'}`,
      `  + received: ${received[index] ?? '(none)'}`,
    );
  }
  if (differing > shown) lines.push(`(${differing - shown} more differing event(s))`);
  return lines.join('\n');
}

/**
 * Top-level fields of an answer or event that name one answer (an id, a creation time): compared by presence only, when
 * asked.
 */
const INSTANCE_FIELDS = ['id', 'created', 'created_at'];

/**
 * A JSON value with its instance fields (top level, and in a `message` or `response` object) set to
 * `true`: what an adapter makes of one request's id and time differs from a recording's.
 */
export function withoutInstanceFields(value: unknown): unknown {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return value;
  const copy: Record<string, unknown> = { ...(value as Record<string, unknown>) };
  for (const field of INSTANCE_FIELDS) if (field in copy) copy[field] = true;
  for (const inner of ['message', 'response'])
    if (typeof copy[inner] === 'object') copy[inner] = withoutInstanceFields(copy[inner]);
  return copy;
}

/**
 * Whether two event data lists hold the same events: JSON compared by value (by presence only for
 * instance fields, with `instances`), anything else as text.
 */
export function sameEvents(
  actual: readonly string[],
  expected: readonly string[],
  instances = false,
): { same: true } | { same: false; index: number } {
  const parse = (data: string): unknown => {
    try {
      const value = JSON.parse(data) as unknown;
      return instances ? withoutInstanceFields(value) : value;
    } catch {
      return data;
    }
  };
  for (let index = 0; index < Math.max(actual.length, expected.length); index += 1) {
    if (
      actual[index] === undefined ||
      expected[index] === undefined ||
      !isDeepStrictEqual(parse(actual[index]!), parse(expected[index]!))
    ) {
      return { same: false, index };
    }
  }
  return { same: true };
}
