import { replaceBlockData, SseSplitter, type SseBlock } from '../sse/sse-relay.ts';

/** What stands in for the gateway's upstream credential in anything it emits. */
export const REDACTED = '[REDACTED]';

/**
 * Shorter secrets are not searched for: a few characters would match ordinary text and mangle it.
 * Real provider keys are far longer.
 */
export const MIN_REDACTED_LENGTH = 8;

const BACKSLASH = 0x5c;
const PERCENT = 0x25;
const LOWER_U = 0x75;
const REPLACEMENT = Buffer.from(REDACTED);
/**
 * How many times a byte may have been percent-encoded: `%2F`, then `%252F` (a URL carried as a
 * parameter of another), then `%25252F`. Each level only puts `25` after the `%`, so a deeper form costs
 * the matcher two more bytes to read, never a search.
 */
export const MAX_PERCENT_DEPTH = 3;
const JSON_U00 = Buffer.from('\\u00');

/** The letter of each short JSON escape, by the character it stands for. */
const SHORT_ESCAPES: ReadonlyMap<string, number> = new Map(
  Object.entries({ '"': '"', '\\': '\\', '/': '/', '\b': 'b', '\f': 'f', '\n': 'n', '\r': 'r', '\t': 't' }).map(
    ([char, letter]) => [char, letter.charCodeAt(0)],
  ),
);

/** One character of the secret and what it may be written as. */
interface SecretChar {
  /** Its UTF-8 bytes: as itself, and what `%XX` escapes (at any depth: `%25XX`, `%2525XX`) stand for. */
  readonly utf8: Buffer;
  /** Its UTF-16 code units, each of which a JSON `\uXXXX` escape may write. */
  readonly units: readonly number[];
  /** The letter of its short JSON escape (`/` for `/`), if it has one. */
  readonly short?: number;
}

/** A secret compiled once for searching. */
interface SecretPattern {
  readonly raw: Buffer;
  readonly chars: readonly SecretChar[];
  /**
   * What every JSON escape of a secret character contains: `\u00` when each character is below U+0100
   * and has no short escape (provider keys), which ordinary escapes (`\n`, `\"`, `\u4e2d`) never
   * contain; a lone backslash otherwise.
   */
  readonly escapeNeedle: Buffer;
  /** Code units below U+0100 (what `\u00XX` stands for) and UTF-8 bytes (what `%XX` stands for) in the secret. */
  readonly units: Uint8Array;
  readonly bytes: Uint8Array;
  /** What a {@link StreamRedactor} reads of the secret, made when the first stream with it starts. */
  stream?: StreamTables;
}

const patterns = new Map<string, SecretPattern>();

function patternOf(secret: string): SecretPattern {
  let pattern = patterns.get(secret);
  if (pattern) return pattern;
  const chars = Array.from(secret, (char): SecretChar => {
    const units = [char.charCodeAt(0)];
    if (char.length === 2) units.push(char.charCodeAt(1));
    return { utf8: Buffer.from(char, 'utf8'), units, short: SHORT_ESCAPES.get(char) };
  });
  const raw = Buffer.from(secret, 'utf8');
  const units = new Uint8Array(256);
  const bytes = new Uint8Array(256);
  for (const char of chars) for (const unit of char.units) if (unit < 0x100) units[unit] = 1;
  for (const byte of raw) bytes[byte] = 1;
  const simple = chars.every((char) => char.short === undefined && char.units.every((unit) => unit < 0x100));
  pattern = { raw, chars, escapeNeedle: simple ? JSON_U00 : Buffer.from('\\'), units, bytes };
  // Secrets are a handful of configured keys; the bound only guards against an unbounded churn.
  if (patterns.size >= 64) patterns.clear();
  patterns.set(secret, pattern);
  return pattern;
}

const hexValue = (byte: number | undefined): number => {
  if (byte === undefined) return -1;
  if (byte >= 0x30 && byte <= 0x39) return byte - 0x30;
  const lower = byte | 0x20;
  return lower >= 0x61 && lower <= 0x66 ? lower - 0x61 + 10 : -1;
};

/** The value of the hex digits at `at` (`count` of them), or -1. */
function hexAt(bytes: Uint8Array, at: number, count: number): number {
  let value = 0;
  for (let index = 0; index < count; index++) {
    const digit = hexValue(bytes[at + index]);
    if (digit === -1) return -1;
    value = value * 16 + digit;
  }
  return value;
}

/** Where a run of backslashes starting at `at` ends. */
function backslashRunEnd(bytes: Uint8Array, at: number): number {
  let end = at;
  while (bytes[end] === BACKSLASH) end++;
  return end;
}

/** How many backslashes end right before `at`. */
function backslashesBefore(bytes: Uint8Array, at: number): number {
  let count = 0;
  while (at - count - 1 >= 0 && bytes[at - count - 1] === BACKSLASH) count++;
  return count;
}

/**
 * Where one character of the secret written at `at` ends, for each way it may be written: written into
 * `ends` from `count` on; returns the new count (as many as before: none).
 * A JSON escape may start with any run of backslashes: a string holding JSON inside a JSON string
 * (an upstream error embedding another's body) doubles them at each level.
 */
function charEnds(bytes: Uint8Array, at: number, char: SecretChar, ends: Int32Array, count: number): number {
  const { utf8 } = char;
  let raw = true;
  for (let index = 0; index < utf8.length && raw; index++) raw = bytes[at + index] === utf8[index];
  if (raw) ends[count++] = at + utf8.length;
  if (bytes[at] === BACKSLASH) {
    let end = at;
    for (const unit of char.units) {
      const run = backslashRunEnd(bytes, end);
      end = run > end && bytes[run] === LOWER_U && hexAt(bytes, run + 1, 4) === unit ? run + 5 : -1;
      if (end === -1) break;
    }
    if (end !== -1) ends[count++] = end;
    if (char.short === BACKSLASH) {
      if (bytes[at + 1] === BACKSLASH) ends[count++] = at + 2;
    } else if (char.short !== undefined) {
      const run = backslashRunEnd(bytes, at);
      if (bytes[run] === char.short) ends[count++] = run + 1;
    }
  }
  if (bytes[at] === PERCENT) {
    // Each byte of the character percent-encoded, each at any depth up to MAX_PERCENT_DEPTH: several
    // depths fit only a `%` itself, so a character of several bytes (none of them `%`) has one way.
    let end = at;
    for (let index = 0; index < utf8.length && end !== -1; index++) end = percentEnd(bytes, end, utf8[index]!);
    if (end !== -1) ends[count++] = end;
    // `%` itself: `%25` is whole, or the first level of `%2525`, `%252525`.
    if (utf8.length === 1 && utf8[0] === PERCENT) {
      for (
        let pair = at + 3, depth = 2;
        depth <= MAX_PERCENT_DEPTH && end !== -1 && hexAt(bytes, pair, 2) === PERCENT;
        pair += 2, depth++
      )
        ends[count++] = pair + 2;
    }
  }
  return count;
}

/** Where `byte` percent-encoded at `at` ends (`%XX`, `%25XX`, `%2525XX`: the shallowest that fits), or -1. */
function percentEnd(bytes: Uint8Array, at: number, byte: number): number {
  if (bytes[at] !== PERCENT) return -1;
  let pair = at + 1;
  for (let depth = 1; depth <= MAX_PERCENT_DEPTH; depth++) {
    const value = hexAt(bytes, pair, 2);
    if (value === byte) return pair + 2;
    if (value !== PERCENT) return -1;
    pair += 2;
  }
  return -1;
}

/** Whether the `%` at `at` starts a percent-encoding (at any depth) of some byte of the secret. */
function percentCandidate(bytes: Uint8Array, at: number, secretBytes: Uint8Array): boolean {
  let pair = at + 1;
  for (let depth = 1; depth <= MAX_PERCENT_DEPTH; depth++) {
    const value = hexAt(bytes, pair, 2);
    if (value === -1) return false;
    if (secretBytes[value] === 1) return true;
    if (value !== PERCENT) return false;
    pair += 2;
  }
  return false;
}

/**
 * Where the secret written at `at` (each character in any of its ways) ends, or -1; the furthest end
 * when several ways fit. The ways are followed as a set of positions, one character at a time, not by
 * backtracking: a character with several ways (`\`, `%` itself) cannot make the work grow faster than
 * the secret's length times the few positions its ways reach.
 */
function matchAt(bytes: Uint8Array, at: number, chars: readonly SecretChar[]): number {
  // Usually one way fits or none: one position. Several only for a character such as `\` or `%`.
  let [from, next] = frontiers;
  from[0] = at;
  let size = 1;
  for (const char of chars) {
    let count = 0;
    for (let index = 0; index < size; index++) {
      if (next.length - count < MAX_CHAR_WAYS) {
        from = grown(from);
        next = grown(next);
        frontiers = [from, next];
      }
      const before = count;
      count = charEnds(bytes, from[index]!, char, next, count);
      // A position reached twice is followed once.
      for (let added = before; added < count; added++) {
        let seen = false;
        for (let earlier = 0; earlier < before && !seen; earlier++) seen = next[earlier] === next[added];
        if (seen) next[added--] = next[--count]!;
      }
    }
    if (count === 0) return -1;
    [from, next] = [next, from];
    size = count;
  }
  let end = from[0]!;
  for (let index = 1; index < size; index++) end = Math.max(end, from[index]!);
  return end;
}

/** Most ways one character is written (raw, `\uXXXX`, its short escape, `%` at each depth). */
const MAX_CHAR_WAYS = 3 + MAX_PERCENT_DEPTH;
/** The two position sets `matchAt` alternates between, reused (the matcher is synchronous) and grown as needed. */
let frontiers: [Int32Array, Int32Array] = [new Int32Array(64), new Int32Array(64)];

function grown(positions: Int32Array): Int32Array {
  const bigger = new Int32Array(positions.length * 2);
  bigger.set(positions);
  return bigger;
}

/** Where the first secret, `%` and escape needle lie in some bytes (-1: nowhere). */
interface Found {
  readonly raw: number;
  readonly percent: number;
  readonly escape: number;
}

/** Bytes walked after a natively found escape before searching natively again. */
const WALK_BYTES = 64;

/**
 * The escapes in `bytes` (a `%`, or the first of a run of backslashes) that could stand for a character
 * of the secret (a `%` at any percent depth), in order. Native searches hop to the next `%` and the next `\u00` (each
 * searched again only once passed, so the whole walk stays linear); the bytes after a hop are walked, since such
 * escapes come in runs (every accent of a text written `\u00e9`) where a native search costs more than the few bytes
 * between them.
 */
function candidateEscapes(bytes: Buffer, pattern: SecretPattern, first: Found): (from: number) => number {
  const length = bytes.length;
  const anyBackslash = pattern.escapeNeedle !== JSON_U00;
  let { percent, escape } = first;
  if (escape !== -1) escape -= backslashesBefore(bytes, escape);
  return function nextCandidate(from) {
    let at = from;
    while (at < length) {
      if (percent !== -1 && percent < at) percent = bytes.indexOf(PERCENT, at);
      if (escape !== -1 && escape < at) {
        escape = bytes.indexOf(pattern.escapeNeedle, at);
        if (escape !== -1) escape = Math.max(at, escape - backslashesBefore(bytes, escape));
      }
      if (percent === -1 && escape === -1) return -1;
      at = percent === -1 ? escape : escape === -1 ? percent : Math.min(percent, escape);
      for (const stop = Math.min(length, at + WALK_BYTES); at < stop; at++) {
        const byte = bytes[at]!;
        if (byte === PERCENT) {
          if (percentCandidate(bytes, at, pattern.bytes)) return at;
        } else if (byte === BACKSLASH) {
          if (anyBackslash) return at;
          const run = backslashRunEnd(bytes, at);
          if (bytes[run] === LOWER_U && bytes[run + 1] === 0x30 && bytes[run + 2] === 0x30) {
            const high = hexValue(bytes[run + 3]);
            const low = hexValue(bytes[run + 4]);
            if (high !== -1 && low !== -1 && pattern.units[high * 16 + low] === 1) return at;
          }
          at = run - 1;
        }
      }
    }
    return -1;
  };
}

/**
 * Where a replacement starting at `start` must start instead so that the text around it stays valid
 * JSON: a match that begins inside an escape (in its hex digits, or right after an unpaired backslash)
 * takes that escape with it.
 */
function alignedStart(bytes: Uint8Array, start: number): number {
  for (let digits = 0; digits <= 3; digits++) {
    const u = start - digits - 1;
    if (u < 1 || bytes[u] !== LOWER_U || bytes[u - 1] !== BACKSLASH) continue;
    if (hexAt(bytes, u + 1, digits) === -1) continue;
    if (backslashesBefore(bytes, u) % 2 === 1) return u - 1;
  }
  return backslashesBefore(bytes, start) % 2 === 1 ? start - 1 : start;
}

/** Spans `[start, end)` of every way the secret is written in `bytes`, sorted and merged. */
function findSpans(bytes: Buffer, pattern: SecretPattern, first: Found): [number, number][] {
  const spans: [number, number][] = [];
  const { raw, chars } = pattern;
  for (let found = first.raw; found !== -1; found = bytes.indexOf(raw, found + 1))
    spans.push([found, found + raw.length]);

  // A written form with any escape has a first one, standing for a secret character, with at most the
  // rest of the secret's bytes written plainly before it: only there are starts tried.
  let tried = 0;
  const nextCandidate = candidateEscapes(bytes, pattern, first);
  for (let at = nextCandidate(0); at !== -1; at = nextCandidate(tried)) {
    for (let start = Math.max(tried, at - raw.length + 1); start <= at; start++) {
      const end = matchAt(bytes, start, chars);
      if (end !== -1) spans.push([start, end]);
    }
    // Starting inside a run of backslashes reads the same escape as starting at its first one.
    tried = bytes[at] === BACKSLASH && pattern.escapeNeedle === JSON_U00 ? backslashRunEnd(bytes, at) : at + 1;
  }
  if (spans.length === 0) return spans;

  spans.sort((a, b) => a[0] - b[0]);
  const merged: [number, number][] = [];
  for (const [start, end] of spans) {
    const aligned = alignedStart(bytes, start);
    const last = merged[merged.length - 1];
    if (last && aligned < last[1]) last[1] = Math.max(last[1], end);
    else merged.push([aligned, end]);
  }
  return merged;
}

/**
 * `bytes` with the secret (the endpoint's API key) replaced by {@link REDACTED} wherever it is written:
 * as itself, with any of its characters JSON-escaped (`\uXXXX` in either case, `\/` and the other
 * short escapes, at any nesting depth of JSON in JSON strings) or percent-encoded (`%XX`, and encoded
 * again up to {@link MAX_PERCENT_DEPTH} levels: `%252F`, `%25252F`), in any mix.
 * A replacement never leaves part of an escape behind, so JSON stays JSON.
 *
 * Returns `bytes` itself when the secret does not occur. The common case costs three native searches:
 * the secret itself, `\u00` (what a JSON escape of a key's character starts with, which ordinary text
 * such as `\n`, `\"` or `\u4e2d` does not contain) and `%`, all absent. Where a `%` or `\u00` occurs,
 * the bytes from there on are gone through once more (linear), and a match is tried only at the few
 * positions before an escape that stands for one of the secret's characters.
 */
export function redactCredential(bytes: Buffer, secret: string | undefined): Buffer {
  if (!secret || secret.length < MIN_REDACTED_LENGTH) return bytes;
  const pattern = patternOf(secret);
  const first: Found = {
    escape: bytes.indexOf(pattern.escapeNeedle),
    percent: bytes.indexOf(PERCENT),
    raw: bytes.indexOf(pattern.raw),
  };
  if (first.escape === -1 && first.percent === -1 && first.raw === -1) return bytes;
  const spans = findSpans(bytes, pattern, first);
  if (spans.length === 0) return bytes;
  const parts: Buffer[] = [];
  let from = 0;
  for (const [start, end] of spans) {
    parts.push(bytes.subarray(from, start), REPLACEMENT);
    from = end;
  }
  parts.push(bytes.subarray(from));
  return Buffer.concat(parts);
}

/** The same for text: an upstream message or answer the gateway passes on, a relayed header value. */
export function redactCredentialText(text: string, secret: string | undefined): string {
  if (!secret || secret.length < MIN_REDACTED_LENGTH) return text;
  if (!text.includes(secret) && !text.includes('\\') && !text.includes('%')) return text;
  const bytes = Buffer.from(text, 'utf8');
  const redacted = redactCredential(bytes, secret);
  return redacted === bytes ? text : redacted.toString('utf8');
}

// ---------------------------------------------------------------------------------------------------
// Streams: a secret split across the text deltas of several events.

/**
 * Fewest characters of the secret a stream's text may end with before the event that ends it is held
 * back: a shorter start (`sk-`, a vendor's public prefix) goes out, and only the rest of the secret is
 * redacted if it follows.
 */
export const HOLD_MIN_CHARS = 4;
/**
 * Most events, and bytes, held back at once: past either, they go out and only the rest of a secret that follows is
 * redacted.
 */
export const MAX_HELD_EVENTS = 256;
export const MAX_HELD_BYTES = 256 * 1024;

const QUOTE = 0x22;
const COLON = 0x3a;
const EMPTY = Buffer.alloc(0);

type Json = Record<string, unknown>;
const isJsonObject = (value: unknown): value is Json =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

/** An event as the stream redactor saw it: its bytes, and its data's object when that was read. */
interface StreamBlock {
  raw: Buffer;
  readonly payload: Json | undefined;
  /** A text of it was changed: it goes out with its data written anew from `payload`. */
  dirty: boolean;
  /** Out to the client: its text can no longer change. */
  released: boolean;
}

/** One text delta of an event: the string at `container[field]`, part of the text of `channel`. */
interface TextPiece {
  readonly channel: string;
  readonly container: Json;
  readonly field: string;
}

/** The last characters of one channel's text that are a start of the secret, and the deltas they came in. */
interface Channel {
  /** How many: the longest end of the channel's text that is a start of the secret. */
  matched: number;
  /** Oldest first; each holds the last `length` characters of its delta's (current) text. */
  recent: { readonly block: StreamBlock; readonly piece: TextPiece; readonly length: number }[];
}

const CHAT_FIELDS = ['content', 'reasoning_content', 'reasoning', 'refusal'] as const;
const MESSAGES_FIELDS = ['text', 'partial_json', 'thinking'] as const;

/** Channels end with `|` + what they carry, so that a group closes with its prefix. */
const channelOf = (group: string, what: string): string => `${group}|${what}`;
/** A Responses delta's group: its kind, item and part (`response.output_text` of `msg_1`, part 0). */
const responsesGroup = (kind: string, payload: Json): string =>
  `${kind} ${String(payload.item_id ?? payload.output_index)} ${String(payload.content_index ?? payload.summary_index ?? '')}`;

/**
 * The text deltas of an event's data, by their shape (the three wire formats' streamed text): Chat
 * Completions `choices[i].delta.content` (and reasoning, refusal, tool call arguments), one channel per
 * choice and field; Messages `content_block_delta` `delta.text` (`partial_json`, `thinking`), one per
 * content block; Responses `*.delta` events with a string `delta` (output text, arguments, reasoning
 * summaries; not audio), one per item and part.
 */
function textPieces(payload: Json): TextPiece[] {
  const pieces: TextPiece[] = [];
  const add = (group: string, what: string, container: unknown, field: string) => {
    if (isJsonObject(container) && typeof container[field] === 'string' && container[field] !== '')
      pieces.push({ channel: channelOf(group, what), container, field });
  };
  if (Array.isArray(payload.choices)) {
    payload.choices.forEach((choice: unknown, position) => {
      if (!isJsonObject(choice) || !isJsonObject(choice.delta)) return;
      const group = `choice ${String(choice.index ?? position)}`;
      const delta = choice.delta;
      for (const field of CHAT_FIELDS) add(group, field, delta, field);
      add(group, 'function_call', delta.function_call, 'arguments');
      if (Array.isArray(delta.tool_calls)) {
        delta.tool_calls.forEach((call: unknown, at) => {
          if (isJsonObject(call)) add(group, `tool ${String(call.index ?? at)}`, call.function, 'arguments');
        });
      }
    });
  } else if (payload.type === 'content_block_delta') {
    for (const field of MESSAGES_FIELDS) add(`block ${String(payload.index)}`, 'text', payload.delta, field);
  } else if (
    typeof payload.type === 'string' &&
    payload.type.endsWith('.delta') &&
    payload.type !== 'response.audio.delta'
  ) {
    add(responsesGroup(payload.type.slice(0, -'.delta'.length), payload), 'text', payload, 'delta');
  }
  return pieces;
}

/**
 * The groups of channels whose text an event ends: a choice's `finish_reason`, `content_block_stop`, a Responses
 * `*.done`.
 */
function closedGroups(payload: Json): string[] {
  if (Array.isArray(payload.choices)) {
    const groups: string[] = [];
    payload.choices.forEach((choice: unknown, position) => {
      if (isJsonObject(choice) && typeof choice.finish_reason === 'string')
        groups.push(`choice ${String(choice.index ?? position)}`);
    });
    return groups;
  }
  if (payload.type === 'content_block_stop') return [`block ${String(payload.index)}`];
  if (typeof payload.type === 'string' && payload.type.endsWith('.done'))
    return [responsesGroup(payload.type.slice(0, -'.done'.length), payload)];
  return [];
}

function parseJsonObject(data: string): Json | undefined {
  if (data.charCodeAt(0) !== 0x7b /* { */) return undefined;
  try {
    const value: unknown = JSON.parse(data);
    return isJsonObject(value) ? value : undefined;
  } catch {
    return undefined;
  }
}

/** Whether the `"` before `at` closes an object's member name (a `:` follows) rather than a value. */
function closesName(bytes: Uint8Array, at: number): boolean {
  while (bytes[at] === 0x20 || bytes[at] === 0x09 || bytes[at] === 0x0a || bytes[at] === 0x0d) at++;
  return bytes[at] === COLON;
}

/** A start of the secret some text ends with, and the deltas it came in (none: sent in events not read). */
interface Run {
  readonly found: [number, number][];
  readonly matched: number;
  readonly recent: Channel['recent'];
}

/** Stands for deltas that went out unread: characters of the secret's start that can no longer change. */
const SENT: StreamBlock = { raw: EMPTY, payload: undefined, dirty: false, released: true };
const SENT_PIECE: TextPiece = { channel: '', container: {}, field: '' };

/** What a stream redactor reads of its secret: made once per secret, every stream of an endpoint shares it. */
interface StreamTables {
  /** The secret ('' for none long enough to search for: nothing is read). */
  readonly secret: string;
  readonly raw: Buffer;
  /** The byte checks of `mayMatter` assume one byte per character; other secrets have every event read. */
  readonly ascii: boolean;
  /**
   * What an escape of one of the secret's characters contains: `\u00`, and `\/` and the like for characters with a
   * short escape.
   */
  readonly escapeNeedles: readonly Buffer[];
  /**
   * KMP failure function of the secret (by UTF-16 unit): the longest proper start that is also an end of its first i+1
   * units.
   */
  readonly failure: Int32Array;
  /** `"` and the secret's character at each index (a text starting there). */
  readonly continuations: readonly Buffer[];
}

const NO_SECRET: StreamTables = {
  secret: '',
  raw: EMPTY,
  ascii: false,
  escapeNeedles: [JSON_U00],
  failure: new Int32Array(0),
  continuations: [],
};

/**
 * The tables of {@link StreamRedactor} for `secret`, kept with its search pattern: a provider's key runs to 160
 * characters and more, and making them for each stream took about 40 µs and a 2-byte buffer per character.
 */
function streamTablesOf(secret: string | undefined): StreamTables {
  if (!secret || secret.length < MIN_REDACTED_LENGTH) return NO_SECRET;
  const pattern = patternOf(secret);
  if (pattern.stream) return pattern.stream;
  const { raw } = pattern;
  const length = secret.length;
  const shorts = new Set(pattern.chars.flatMap((char) => (char.short === undefined ? [] : [char.short])));
  const failure = new Int32Array(length);
  for (let index = 1, matched = 0; index < length; index++) {
    while (matched > 0 && secret.charCodeAt(index) !== secret.charCodeAt(matched)) matched = failure[matched - 1]!;
    if (secret.charCodeAt(index) === secret.charCodeAt(matched)) matched++;
    failure[index] = matched;
  }
  return (pattern.stream = {
    secret,
    raw,
    ascii: raw.length === length,
    escapeNeedles: [JSON_U00, ...[...shorts].map((letter) => Buffer.from([BACKSLASH, letter]))],
    failure,
    continuations: Array.from({ length }, (_unused, index) => Buffer.from([QUOTE, raw[index] ?? 0])),
  });
}

/**
 * Redacts the endpoint's credential from one stream's events as they pass (the relay's `rewrite`), a
 * secret split across the text deltas of several events included, which the client would join.
 *
 * Each event's bytes first go through {@link redactCredential} (the secret whole inside one event, in
 * any written form). Then each channel of streamed text (a choice's content, a content block, a
 * Responses part) is followed through its deltas, decoded: its end that is a start of the secret is
 * kept, with the deltas it came in. When a delta completes the secret, its part in that delta is cut
 * out and its earlier part in deltas not yet sent too, one {@link REDACTED} standing for it all.
 *
 * An event whose channel's text then ends with at least {@link HOLD_MIN_CHARS} characters of the
 * secret's start is held back, and every event after it, until the channel's next delta shows whether
 * the secret goes on (it is redacted, in the held events too) or not (they go out unchanged); until
 * the channel closes (`finish_reason`, `content_block_stop`, `*.done`); until {@link flush} (the end of
 * the stream); or until {@link MAX_HELD_EVENTS} or {@link MAX_HELD_BYTES} are held. So at most
 * HOLD_MIN_CHARS - 1 characters of the secret's start reach the client next to the rest's marker.
 *
 * Cost: an event's data is parsed only where its bytes could hold part of such a split, which the
 * bytes show with a few native searches: a JSON string value ending with at least HOLD_MIN_CHARS
 * characters of the secret's start (`…sk-up"`), one beginning with what continues a start some text
 * ended with (`:"…`), an escape that may stand for a character of the secret (then the bytes cannot
 * tell), or while events are held. A value ending with a shorter start (`…s"`, `…sk-"`) is only noted,
 * for the whole stream (which channel it was in is not read): a later delta that continues it is read
 * and tried from there too, so it may redact text that is the secret but for its first few characters
 * in another channel, never miss it. Every other event goes out as the very bytes `redactCredential`
 * returns. Events not changed go out byte for byte; a changed one is written anew from its parsed data
 * (same members, JSON.stringify's spacing).
 */
export class StreamRedactor {
  /** The secret and its search tables. */
  private readonly key: StreamTables;
  private readonly channels = new Map<string, Channel>();
  /** Bit n: some text that went out unread ended with the secret's first n characters (n < HOLD_MIN_CHARS). */
  private loose = 0;
  private held: StreamBlock[] = [];
  private heldBytes = 0;
  /** An unfinished event at the end of the stream that came while events were held. */
  private heldRest: Buffer = EMPTY;

  /** Without a secret long enough to search for, `rewrite` hands every event back as it came. */
  constructor(secret: string | undefined) {
    this.key = streamTablesOf(secret);
  }

  /**
   * Events (or an unfinished one at the end of the stream) to write: what to write now, maybe less (held) or more
   * (released).
   */
  rewrite(bytes: Buffer): Buffer {
    if (!this.key.secret) return bytes;
    const redacted = redactCredential(bytes, this.key.secret);
    if (this.held.length === 0 && !this.mayMatter(redacted, true)) return redacted;
    const splitter = new SseSplitter();
    const blocks = splitter.push(redacted);
    const out: Buffer[] = [];
    for (const block of blocks) this.take(block, out, blocks.length === 1);
    const rest = splitter.rest();
    if (rest.length > 0) {
      if (this.held.length > 0) this.heldRest = Buffer.concat([this.heldRest, rest]);
      else out.push(rest);
    }
    return out.length === 1 ? out[0]! : Buffer.concat(out);
  }

  /**
   * What is held back, to write when the stream stops (it ended, broke off or was cut by the relay); nothing is held
   * after.
   */
  flush(): Buffer {
    const out: Buffer[] = [];
    this.release(out);
    out.push(this.heldRest);
    this.heldRest = EMPTY;
    return Buffer.concat(out);
  }

  /** Events held back right now (for tests). */
  get heldEvents(): number {
    return this.held.length;
  }

  /**
   * Whether events in `bytes` must be read, by bytes alone: an escape that may stand for one of the
   * secret's characters, a JSON string value ending with at least HOLD_MIN_CHARS characters of its
   * start, or one beginning with what would continue a start some text ended with. A value ending with
   * a shorter start is noted in {@link loose} when `note`.
   */
  private mayMatter(bytes: Buffer, note: boolean): boolean {
    if (!this.key.ascii) return true;
    for (const needle of this.key.escapeNeedles) if (bytes.indexOf(needle) !== -1) return true;
    if (this.continues(bytes)) return true;
    const { raw } = this.key;
    const first = raw[0]!;
    let loose = 0;
    // Each occurrence of its first character (a native search each: cheaper than a loop over the bytes,
    // even for a common letter) followed by more of the secret, then `"`.
    for (let at = bytes.indexOf(first); at !== -1; at = bytes.indexOf(first, at + 1)) {
      let length = 1;
      while (length < raw.length && bytes[at + length] === raw[length]) length++;
      if (length < raw.length && bytes[at + length] === QUOTE && !closesName(bytes, at + length + 1)) {
        if (length >= HOLD_MIN_CHARS) return true;
        loose |= 1 << length;
      }
    }
    // A later event of the same bytes may continue it: they are read, one event after the other.
    if (loose !== 0 && this.continuesLoose(bytes, loose & ~this.loose)) return true;
    if (note) this.loose |= loose;
    return false;
  }

  /**
   * Whether a JSON string value in `bytes` begins with what continues a start of the secret that some channel's text
   * (or some text not read) ends with.
   */
  private continues(bytes: Buffer): boolean {
    if (this.loose !== 0 && this.continuesLoose(bytes, this.loose)) return true;
    for (const channel of this.channels.values()) {
      for (let matched = channel.matched; matched > 0; matched = this.key.failure[matched - 1]!) {
        if (this.opensValue(bytes, this.key.continuations[matched]!)) return true;
      }
    }
    return false;
  }

  private continuesLoose(bytes: Buffer, loose: number): boolean {
    for (let matched = 1; matched < HOLD_MIN_CHARS; matched++) {
      if ((loose & (1 << matched)) !== 0 && this.opensValue(bytes, this.key.continuations[matched]!)) return true;
    }
    return false;
  }

  /** Whether `needle` (a `"` and a character) occurs in `bytes` as the start of a member's value (a `:` before it). */
  private opensValue(bytes: Buffer, needle: Buffer): boolean {
    for (let at = bytes.indexOf(needle); at !== -1; at = bytes.indexOf(needle, at + 1)) {
      let before = at - 1;
      while (bytes[before] === 0x20 || bytes[before] === 0x09 || bytes[before] === 0x0a || bytes[before] === 0x0d)
        before--;
      if (bytes[before] === COLON) return true;
    }
    return false;
  }

  /** One event: followed through its text deltas, then held or written (with any it releases). */
  private take(sse: SseBlock, out: Buffer[], known: boolean): void {
    const read = sse.event !== undefined && (this.held.length > 0 || known || this.mayMatter(sse.raw, true));
    const payload = read ? parseJsonObject(sse.event!.data) : undefined;
    const block: StreamBlock = { raw: sse.raw, payload, dirty: false, released: false };
    if (payload) {
      for (const piece of textPieces(payload)) this.follow(piece, block);
      for (const group of closedGroups(payload)) {
        for (const name of [...this.channels.keys()]) if (name.startsWith(`${group}|`)) this.channels.delete(name);
      }
    }
    if (!this.mustHold()) {
      this.release(out);
      out.push(this.bytesOf(block));
      block.released = true;
      block.raw = EMPTY;
      return;
    }
    // Held bytes outlive the chunk they were read from: a copy.
    block.raw = Buffer.from(block.raw);
    this.held.push(block);
    this.heldBytes += block.raw.length;
    if (this.held.length > MAX_HELD_EVENTS || this.heldBytes > MAX_HELD_BYTES) this.release(out);
  }

  /** Whether some channel's text ends with a start of the secret long enough to hold, in deltas not yet sent. */
  private mustHold(): boolean {
    for (const channel of this.channels.values()) {
      if (channel.matched >= HOLD_MIN_CHARS && channel.recent.some((entry) => !entry.block.released)) return true;
    }
    return false;
  }

  private release(out: Buffer[]): void {
    for (const block of this.held) {
      out.push(this.bytesOf(block));
      block.released = true;
      block.raw = EMPTY;
    }
    this.held = [];
    this.heldBytes = 0;
  }

  private bytesOf(block: StreamBlock): Buffer {
    if (!block.dirty || !block.payload) return block.raw;
    // Written anew from its parsed data: through the byte matcher again, whatever the decoding made of it.
    return redactCredential(replaceBlockData(block.raw, JSON.stringify(block.payload)), this.key.secret);
  }

  /**
   * One text delta through its channel's match of the secret (KMP), from the channel's own state and
   * from each start noted in {@link loose}: the secret completed is cut out.
   */
  private follow(piece: TextPiece, block: StreamBlock): void {
    let channel = this.channels.get(piece.channel);
    if (!channel) this.channels.set(piece.channel, (channel = { matched: 0, recent: [] }));
    const text = piece.container[piece.field] as string;
    let run = this.scan(text, channel.matched, channel.recent);
    for (let matched = 1; matched < HOLD_MIN_CHARS; matched++) {
      if ((this.loose & (1 << matched)) === 0 || matched === channel.matched) continue;
      const other = this.scan(text, matched, [{ block: SENT, piece: SENT_PIECE, length: matched }]);
      // The reading that finds the secret reaching back furthest, else the one ending with the longest start.
      const reach = (one: Run) => (one.found.length > 0 ? 1 + Math.max(0, -one.found[0]![0]) : 0);
      if (reach(other) > reach(run) || (reach(other) === reach(run) && other.matched > run.matched)) run = other;
    }
    const { found, matched } = run;
    let recent: Channel['recent'];
    if (found.length === 0) {
      recent = matched <= text.length ? [] : this.lastOf(run.recent, matched - text.length);
    } else {
      const [start] = found[0]!;
      const marked = start < 0 && this.cutEarlier(run.recent, -start);
      let rewritten = '';
      let from = 0;
      for (const [begin, end] of found) {
        rewritten += text.slice(from, Math.max(0, begin));
        if (!(begin < 0 && marked)) rewritten += REDACTED;
        from = end;
      }
      piece.container[piece.field] = rewritten + text.slice(from);
      block.dirty = true;
      recent = [];
    }
    if (matched === 0) {
      // Nothing of the secret at its end: nothing to keep.
      this.channels.delete(piece.channel);
      return;
    }
    recent.push({ block, piece, length: Math.min(matched, text.length - (found.at(-1)?.[1] ?? 0)) });
    channel.recent = recent;
    channel.matched = matched;
  }

  /** `text` through the secret's KMP automaton from `matched` characters (those in `recent`). */
  private scan(text: string, matched: number, recent: Channel['recent']): Run {
    const { secret, failure } = this.key;
    /** `[start, end)` of the secret in this text; a first start below 0 reaches into earlier deltas. */
    const found: [number, number][] = [];
    for (let index = 0; index < text.length; index++) {
      const unit = text.charCodeAt(index);
      while (matched > 0 && secret.charCodeAt(matched) !== unit) matched = failure[matched - 1]!;
      if (secret.charCodeAt(matched) === unit) matched++;
      if (matched === secret.length) {
        found.push([index + 1 - secret.length, index + 1]);
        // What follows comes after the marker: a new match starts afresh.
        matched = 0;
      }
    }
    return { found, matched, recent };
  }

  /** The entries holding the last `length` characters of `recent`. */
  private lastOf(recent: Channel['recent'], length: number): Channel['recent'] {
    const kept: Channel['recent'] = [];
    for (let index = recent.length - 1; index >= 0 && length > 0; index--) {
      const entry = recent[index]!;
      kept.unshift(entry.length <= length ? entry : { ...entry, length });
      length -= entry.length;
    }
    return kept;
  }

  /**
   * Cuts the last `length` characters (the secret's start) out of the deltas in `recent` not yet sent,
   * the earliest of them ending with the marker; whether one was (else the marker goes in the delta
   * that completed the secret).
   */
  private cutEarlier(recent: Channel['recent'], length: number): boolean {
    let earliest: TextPiece | undefined;
    for (let index = recent.length - 1; index >= 0 && length > 0; index--) {
      const { block, piece, length: kept } = recent[index]!;
      const cut = Math.min(kept, length);
      length -= cut;
      if (block.released) continue;
      const text = piece.container[piece.field] as string;
      piece.container[piece.field] = text.slice(0, text.length - cut);
      block.dirty = true;
      earliest = piece;
    }
    if (earliest) earliest.container[earliest.field] = `${earliest.container[earliest.field] as string}${REDACTED}`;
    return earliest !== undefined;
  }
}
