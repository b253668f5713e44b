import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { isDeepStrictEqual } from 'node:util';
import { WIRE_FORMATS } from '../../src/core/formats/index.ts';
import { SseSplitter } from '../../src/data-plane/sse/sse-splitter.ts';
import type { SseEvent, StreamFixupDeclaration, TokenUsage, UpstreamRouteId, WireFormat } from '../../src/plugins/plugin-contract.ts';
import { FixupChain } from '../../src/data-plane/sse/fixup-chain.ts';

/**
 * An answer recorded from a real upstream, kept in a plugin's `__fixtures__/` folder under one base name:
 * - `<name>.fixture.json`: `{"route": "chat-completions", "model": "acme/acme-1", "stream"?: false, "usage"?: {...}}`,
 *   the route and the canonical model it was recorded from, whether it is a stream (the default) or a
 *   JSON answer (`"stream": false`), and the usage the plugin must read from it (`inputTokens`,
 *   `outputTokens`, `cachedTokens`; optional for a stream, required for a JSON answer);
 * - a stream: `<name>.chunks.txt`, the stream's events, one `data` payload a line, in order; and
 *   `<name>.expected.txt` (optional), what clients of that model must receive once the plugin's
 *   stream fixups ran, same layout (without it, the stream must pass unchanged);
 * - a JSON answer: `<name>.body.json`, the answer's body exactly as the upstream sent it.
 */
export type RecordedFixture = RecordedStream | RecordedBody;

interface RecordedAnswer {
  readonly name: string;
  readonly route: UpstreamRouteId;
  /** Canonical ID of the model the answer was recorded from. */
  readonly model: string;
  readonly usage?: TokenUsage;
}

/** A recorded stream (`<name>.chunks.txt`). */
export interface RecordedStream extends RecordedAnswer {
  readonly stream: true;
  readonly chunks: readonly string[];
  readonly expected?: readonly string[];
}

/** A recorded JSON answer (`<name>.body.json`), always with the usage the plugin must read from it. */
export interface RecordedBody extends RecordedAnswer {
  readonly stream: false;
  /** The body's text, as recorded. */
  readonly body: string;
  readonly usage: TokenUsage;
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
  if (typeof meta.model !== 'string' || !meta.model.includes('/')) throw new Error(`${path}: model: must be the canonical ID (vendor/model) it was recorded from`);
  if (meta.stream !== undefined && typeof meta.stream !== 'boolean') throw new Error(`${path}: stream: must be true (a stream, the default) or false (a JSON answer)`);
  const usage = meta.usage as Record<string, unknown> | undefined;
  if (usage !== undefined && !['inputTokens', 'outputTokens', 'cachedTokens'].every((key) => typeof usage[key] === 'number')) {
    throw new Error(`${path}: usage: must give inputTokens, outputTokens and cachedTokens`);
  }
  const chunksPath = join(folder, `${name}.chunks.txt`);
  const expectedPath = join(folder, `${name}.expected.txt`);
  const bodyPath = join(folder, `${name}.body.json`);
  const base = { name, route: meta.route as UpstreamRouteId, model: meta.model };
  if (meta.stream === false) {
    if (!existsSync(bodyPath)) throw new Error(`${path}: ${name}.body.json is missing beside it ("stream": false: a recorded JSON answer)`);
    if (existsSync(chunksPath) || existsSync(expectedPath)) throw new Error(`${path}: "stream": false, yet ${name}.chunks.txt or ${name}.expected.txt is beside it (a JSON answer is ${name}.body.json)`);
    if (usage === undefined) throw new Error(`${path}: usage: a recorded JSON answer must give the usage the plugin must read from it`);
    const body = readFileSync(bodyPath, 'utf8');
    try {
      JSON.parse(body);
    } catch (error) {
      throw new Error(`${bodyPath}: cannot be read as JSON: ${(error as Error).message}`);
    }
    return { ...base, stream: false, body, usage: usage as unknown as TokenUsage };
  }
  if (!existsSync(chunksPath)) throw new Error(`${path}: ${name}.chunks.txt is missing beside it (for a recorded JSON answer: "stream": false and ${name}.body.json)`);
  if (existsSync(bodyPath)) throw new Error(`${path}: ${name}.body.json is beside a stream fixture (set "stream": false for a recorded JSON answer)`);
  return {
    ...base,
    stream: true,
    chunks: lines(chunksPath),
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
  return events.map((event) => `${event.event === undefined ? '' : `event: ${event.event}\n`}data: ${event.data}\n\n`).join('');
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
export function eventDiff(expected: readonly string[], received: readonly string[], limit = 5): string {
  const lines: string[] = [];
  let shown = 0;
  let differing = 0;
  for (let index = 0; index < Math.max(expected.length, received.length); index += 1) {
    if (sameEvents([received[index] ?? ''], [expected[index] ?? '']).same && expected[index] !== undefined && received[index] !== undefined) continue;
    differing += 1;
    if (shown === limit) continue;
    shown += 1;
    lines.push(`event ${index + 1}:`, `  - expected: ${expected[index] ?? '(none)'}`, `  + received: ${received[index] ?? '(none)'}`);
  }
  if (differing > shown) lines.push(`(${differing - shown} more differing event(s))`);
  return lines.join('\n');
}

/** Whether two event data lists hold the same events: JSON compared by value, anything else as text. */
export function sameEvents(actual: readonly string[], expected: readonly string[]): { same: true } | { same: false; index: number } {
  const parse = (data: string): unknown => {
    try {
      return JSON.parse(data);
    } catch {
      return data;
    }
  };
  for (let index = 0; index < Math.max(actual.length, expected.length); index += 1) {
    if (actual[index] === undefined || expected[index] === undefined || !isDeepStrictEqual(parse(actual[index]!), parse(expected[index]!))) {
      return { same: false, index };
    }
  }
  return { same: true };
}
