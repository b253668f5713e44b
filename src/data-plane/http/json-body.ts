import { isUtf8 } from 'node:buffer';
import type { IncomingMessage } from 'node:http';
import { badRequest, fieldError, invalidJson, payloadTooLarge, validationError } from '../../core/gateway-errors.ts';
import type { Readable } from 'node:stream';

/**
 * Bounds on every JSON request body, checked in one linear pass before the body is parsed or walked:
 * deeper nesting or more elements than any real request carries are refused with a 400 naming the
 * limit, so that no recursive walk (validation, estimates) can overflow the stack or run for seconds.
 */
export const JSON_BODY_LIMITS: JsonLimits = { maxDepth: 256, maxElements: 1_000_000 };

/** A request body as received, parsed, and where each top-level member's value sits in the bytes. */
export interface JsonRequestBody {
  readonly bytes: Buffer;
  readonly body: Record<string, unknown>;
  /** The top-level members in the order sent, repeated keys included (`JSON.parse` keeps the last). */
  readonly members: readonly JsonMember[];
  /** One past the top-level closing brace. */
  readonly end: number;
}

function describe(value: unknown): string {
  return value === null ? 'null' : Array.isArray(value) ? 'an array' : typeof value;
}

/**
 * Reads a request body once, up to `limitBytes`, checks that it is UTF-8 and within the
 * {@link JSON_BODY_LIMITS}, and parses it as one JSON object. Any content type is read as JSON
 * (`curl -d` sends a form type); a declared length over the limit is refused before reading.
 */
export async function readJsonRequestBody(
  req: IncomingMessage,
  limitBytes: number,
  limits: JsonLimits = JSON_BODY_LIMITS,
): Promise<JsonRequestBody> {
  const declared = Number(req.headers['content-length']);
  if (declared > limitBytes) throw payloadTooLarge(limitBytes);
  const bytes = await readLimited(req, limitBytes, () => payloadTooLarge(limitBytes));
  return parseJsonRequestBody(bytes, limits);
}

/** The checks and parse of {@link readJsonRequestBody}, for a body that came whole (a WebSocket message). */
export function parseJsonRequestBody(bytes: Buffer, limits: JsonLimits = JSON_BODY_LIMITS): JsonRequestBody {
  // Decoding turns bad bytes into U+FFFD while the raw bytes go upstream, which may read them otherwise
  // (`"model\xff"` as a second `"model"`, say): what the gateway checked would not be what it sent.
  if (!isUtf8(bytes)) throw validationError([fieldError('body', 'not valid UTF-8')]);
  const scan = scanObject(bytes, 0, limits);
  if (scan.kind === 'too-deep') {
    throw badRequest(`Request body is nested deeper than the limit of ${limits.maxDepth} levels of objects and arrays`);
  }
  if (scan.kind === 'too-many-elements') {
    throw badRequest(`Request body holds more than the limit of ${limits.maxElements} array items and object members`);
  }
  const text = bytes.toString('utf8');
  if (text.trim() === '') throw invalidJson('Request body is empty; send a JSON object');
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (error) {
    throw invalidJson(`Request body is not valid JSON: ${(error as Error).message}`);
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw invalidJson(`Request body must be a JSON object, got ${describe(value)}`);
  }
  // Valid JSON the scan did not read as an object cannot happen; refuse rather than forward a body misread.
  if (scan.kind !== 'object') throw invalidJson('Request body could not be read as a JSON object');
  return { bytes, body: value as Record<string, unknown>, members: scan.members, end: scan.end };
}

/** {@link readJsonRequestBody} for routes that only need the parsed object. */
export async function readJsonObject(req: IncomingMessage, limitBytes: number): Promise<Record<string, unknown>> {
  return (await readJsonRequestBody(req, limitBytes)).body;
}

/** Where one member of a JSON object sits in the raw bytes. */
export interface JsonMember {
  /** The key, escapes decoded (`"mod\u0065l"` is `model`). */
  readonly key: string;
  /** Offset of the value's first byte, and one past its last byte (surrounding whitespace excluded). */
  readonly valueStart: number;
  readonly valueEnd: number;
}

/** Bounds checked while scanning, before anything walks the value recursively. */
export interface JsonLimits {
  /** Deepest nesting of objects and arrays (a flat object is depth 1). */
  readonly maxDepth: number;
  /** Most array items plus object members in the whole value. */
  readonly maxElements: number;
}

export type ObjectScan =
  | {
      readonly kind: 'object';
      readonly members: readonly JsonMember[];
      /** One past the closing brace. */ readonly end: number;
    }
  /** Not an object, or not well-formed as far as the scan can tell: `JSON.parse` gives the precise message. */
  | { readonly kind: 'malformed' }
  | { readonly kind: 'too-deep' }
  | { readonly kind: 'too-many-elements' };

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const COMMA = 0x2c;
const COLON = 0x3a;
const OPEN_BRACE = 0x7b;
const CLOSE_BRACE = 0x7d;
const OPEN_BRACKET = 0x5b;
const CLOSE_BRACKET = 0x5d;
const isSpace = (byte: number) => byte === 0x20 || byte === 0x0a || byte === 0x0d || byte === 0x09;

/** Offset of the quote that closes the string opening at `start`, or -1. Linear: each backslash run is counted once. */
function stringEnd(bytes: Uint8Array, start: number): number {
  let from = start + 1;
  for (;;) {
    const quote = bytes.indexOf(QUOTE, from);
    if (quote < 0) return -1;
    let backslashes = 0;
    for (let index = quote - 1; index > start && bytes[index] === BACKSLASH; index--) backslashes++;
    if (backslashes % 2 === 0) return quote;
    from = quote + 1;
  }
}

function decodeKey(bytes: Buffer, start: number, end: number): string | undefined {
  const raw = bytes.toString('utf8', start + 1, end);
  if (!raw.includes('\\')) return raw;
  try {
    return JSON.parse(`"${raw}"`) as string;
  } catch {
    return undefined;
  }
}

// Where the scan stands among the members of the outermost object.
const enum Expect {
  KeyOrEnd,
  Key,
  Colon,
  Value,
  InValue,
}

const MALFORMED: ObjectScan = { kind: 'malformed' };
const TOO_DEEP: ObjectScan = { kind: 'too-deep' };
const TOO_MANY_ELEMENTS: ObjectScan = { kind: 'too-many-elements' };

/**
 * One linear, non-recursive pass over the object that opens at `start` (whitespace before it skipped):
 * where each of its own members' values sits, and the nesting depth and element count checked on the
 * way, stopping at the first limit passed. Well-formed JSON is always read right; other input may come
 * out as `malformed` or as a wrong layout, so callers still parse the bytes with `JSON.parse`.
 */
export function scanObject(bytes: Buffer, start: number, limits: JsonLimits): ObjectScan {
  let index = start;
  while (index < bytes.length && isSpace(bytes[index]!)) index++;
  if (bytes[index] !== OPEN_BRACE) return MALFORMED;
  return new ObjectScanner(bytes, index, limits).run();
}

/** The state of one {@link scanObject} pass; each step gives back the scan's result when it ends there. */
class ObjectScanner {
  private readonly members: JsonMember[] = [];
  private depth = 0;
  private elements = 0;
  // A container just opened: the next token, unless it closes the container, is its first element.
  private fresh = false;
  private expect = Expect.KeyOrEnd;
  private key: string | undefined;
  private valueStart = -1;
  private lastByte = -1;

  constructor(
    private readonly bytes: Buffer,
    private index: number,
    private readonly limits: JsonLimits,
  ) {}

  run(): ObjectScan {
    const { bytes } = this;
    for (const length = bytes.length; this.index < length; this.index++) {
      const byte = bytes[this.index]!;
      if (isSpace(byte)) continue;
      const end =
        byte === CLOSE_BRACE || byte === CLOSE_BRACKET
          ? this.close(byte)
          : byte === COMMA
            ? this.comma()
            : byte === COLON
              ? this.colon()
              : this.token(byte);
      if (end !== undefined) return end;
    }
    return MALFORMED;
  }

  private close(byte: number): ObjectScan | undefined {
    this.fresh = false;
    this.depth--;
    if (this.depth === 0) {
      if (byte !== CLOSE_BRACE) return MALFORMED;
      if (this.expect === Expect.InValue) this.pushMember();
      else if (this.expect !== Expect.KeyOrEnd) return MALFORMED;
      return { kind: 'object', members: this.members, end: this.index + 1 };
    }
    if (this.depth < 0) return MALFORMED;
    this.lastByte = this.index;
    return undefined;
  }

  private comma(): ObjectScan | undefined {
    if (this.depth === 1) {
      if (this.expect !== Expect.InValue) return MALFORMED;
      this.pushMember();
      this.expect = Expect.Key;
    }
    return ++this.elements > this.limits.maxElements ? TOO_MANY_ELEMENTS : undefined;
  }

  private colon(): ObjectScan | undefined {
    if (this.depth === 1) {
      if (this.expect !== Expect.Colon) return MALFORMED;
      this.expect = Expect.Value;
    }
    return undefined;
  }

  /** A token starts here: a string, a container, or a scalar's first byte. */
  private token(byte: number): ObjectScan | undefined {
    if (this.fresh) {
      this.fresh = false;
      if (++this.elements > this.limits.maxElements) return TOO_MANY_ELEMENTS;
    }
    if (this.depth === 1) {
      if (this.expect === Expect.KeyOrEnd || this.expect === Expect.Key) return this.readKey(byte);
      if (this.expect === Expect.Value) {
        this.valueStart = this.index;
        this.expect = Expect.InValue;
      } else if (this.expect !== Expect.InValue || byte === QUOTE || byte === OPEN_BRACE || byte === OPEN_BRACKET) {
        // A second value with no comma before it.
        return MALFORMED;
      }
    }
    if (byte === QUOTE) {
      const end = stringEnd(this.bytes, this.index);
      if (end < 0) return MALFORMED;
      this.index = this.lastByte = end;
      return undefined;
    }
    if (byte === OPEN_BRACE || byte === OPEN_BRACKET) {
      if (++this.depth > this.limits.maxDepth) return TOO_DEEP;
      this.fresh = true;
    }
    this.lastByte = this.index;
    return undefined;
  }

  private readKey(byte: number): ObjectScan | undefined {
    if (byte !== QUOTE) return MALFORMED;
    const end = stringEnd(this.bytes, this.index);
    if (end < 0) return MALFORMED;
    this.key = decodeKey(this.bytes, this.index, end);
    if (this.key === undefined) return MALFORMED;
    this.expect = Expect.Colon;
    this.index = this.lastByte = end;
    return undefined;
  }

  private pushMember(): void {
    this.members.push({ key: this.key!, valueStart: this.valueStart, valueEnd: this.lastByte + 1 });
  }
}

const ignore = () => {};

/**
 * The stream's bytes, or `onTooLarge()`'s error as soon as they pass `limitBytes`. Event-driven: cheaper
 * than an async iterator. `onTooLarge()` may destroy the stream: the error that destroying emits is
 * swallowed here (the caller already has its answer), never left without a listener to crash the process.
 */
export function readLimited(stream: Readable, limitBytes: number, onTooLarge: () => Error): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const cleanup = () => {
      stream.off('data', onData);
      stream.off('end', onEnd);
      stream.off('error', onError);
      stream.off('close', onClose);
    };
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size > limitBytes) {
        cleanup();
        stream.on('error', ignore);
        stream.pause();
        reject(onTooLarge());
        return;
      }
      chunks.push(chunk);
    };
    const onEnd = () => {
      cleanup();
      resolve(chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, size));
    };
    const onError = (error: Error) => {
      cleanup();
      reject(error);
    };
    const onClose = () => {
      cleanup();
      reject(new Error('the stream closed before its end'));
    };
    stream.on('data', onData);
    stream.on('end', onEnd);
    stream.on('error', onError);
    stream.on('close', onClose);
  });
}

/** Top-level keys the gateway reads itself: sent twice, the gateway and the upstream could read different values. */
const READ_KEYS = ['model', 'stream', 'stream_options'] as const;

/** Throws a 400 naming the first key the gateway reads that the body's top level repeats. */
export function assertReadKeysOnce(members: readonly JsonMember[]): void {
  for (const key of READ_KEYS) {
    if (members.filter((member) => member.key === key).length > 1) {
      throw badRequest(`The body gives '${key}' more than once; send it once`, key);
    }
  }
}

interface Splice {
  readonly start: number;
  readonly end: number;
  readonly text: string;
}

function splice(bytes: Buffer, splices: readonly Splice[]): Buffer {
  const parts: Buffer[] = [];
  let at = 0;
  for (const { start, end, text } of [...splices].sort((a, b) => a.start - b.start)) {
    parts.push(bytes.subarray(at, start), Buffer.from(text, 'utf8'));
    at = end;
  }
  parts.push(bytes.subarray(at));
  return Buffer.concat(parts);
}

const INCLUDE_USAGE = '"include_usage":true';

// `stream_options` made to carry `"include_usage":true`: inserted when absent or null, its other fields kept as sent.
function includeUsage(bytes: Buffer, members: readonly JsonMember[], objectEnd: number): Splice[] {
  const options = members.find((member) => member.key === 'stream_options');
  if (!options) {
    const last = members.at(-1);
    const at = last ? last.valueEnd : objectEnd - 1;
    return [{ start: at, end: at, text: `${last ? ',' : ''}"stream_options":{${INCLUDE_USAGE}}` }];
  }
  if (bytes[options.valueStart] !== 0x7b)
    return [{ start: options.valueStart, end: options.valueEnd, text: `{${INCLUDE_USAGE}}` }];
  const scan = scanObject(bytes, options.valueStart, JSON_BODY_LIMITS);
  // The whole body passed the same scan and JSON.parse, so its parts do too.
  if (scan.kind !== 'object') throw new Error('stream_options could not be located in the request body');
  const flags = scan.members.filter((member) => member.key === 'include_usage');
  if (flags.length) {
    return flags
      .filter((flag) => bytes.toString('latin1', flag.valueStart, flag.valueEnd) !== 'true')
      .map((flag) => ({ start: flag.valueStart, end: flag.valueEnd, text: 'true' }));
  }
  const last = scan.members.at(-1);
  const at = last ? last.valueEnd : options.valueStart + 1;
  return [{ start: at, end: at, text: `${last ? ',' : ''}${INCLUDE_USAGE}` }];
}

/**
 * The body sent upstream: the client's bytes with the top-level `model` value replaced and, when
 * `withIncludeUsage`, `stream_options.include_usage` set to true. Nothing else is touched: numbers,
 * key order, whitespace, escapes and unknown fields reach the upstream exactly as sent.
 *
 * @param members the top-level members of `bytes` (a JSON object that passed `JSON.parse`), each read key given once
 * @param objectEnd one past the top-level closing brace
 */
export function upstreamBody(
  bytes: Buffer,
  members: readonly JsonMember[],
  objectEnd: number,
  changes: { readonly model: string; readonly withIncludeUsage: boolean },
): Buffer {
  const splices: Splice[] = [];
  const model = members.find((member) => member.key === 'model');
  if (model) splices.push({ start: model.valueStart, end: model.valueEnd, text: JSON.stringify(changes.model) });
  if (changes.withIncludeUsage) splices.push(...includeUsage(bytes, members, objectEnd));
  return splice(bytes, splices);
}
