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
const JSON_U00 = Buffer.from('\\u00');

/** The letter of each short JSON escape, by the character it stands for. */
const SHORT_ESCAPES: ReadonlyMap<string, number> = new Map(
  Object.entries({ '"': '"', '\\': '\\', '/': '/', '\b': 'b', '\f': 'f', '\n': 'n', '\r': 'r', '\t': 't' }).map(([char, letter]) => [char, letter.charCodeAt(0)]),
);

/** One character of the secret and what it may be written as. */
interface SecretChar {
  /** Its UTF-8 bytes: as itself, and what `%XX` escapes stand for. */
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
 * Where one character of the secret written at `at` ends, for each way it may be written; -1 when none.
 * A JSON escape may start with any run of backslashes: a string holding JSON inside a JSON string
 * (an upstream error embedding another's body) doubles them at each level.
 */
function charEnds(bytes: Uint8Array, at: number, char: SecretChar): number[] {
  const ends: number[] = [];
  const { utf8 } = char;
  let raw = true;
  for (let index = 0; index < utf8.length && raw; index++) raw = bytes[at + index] === utf8[index];
  if (raw) ends.push(at + utf8.length);
  if (bytes[at] === BACKSLASH) {
    let end = at;
    for (const unit of char.units) {
      const run = backslashRunEnd(bytes, end);
      end = run > end && bytes[run] === LOWER_U && hexAt(bytes, run + 1, 4) === unit ? run + 5 : -1;
      if (end === -1) break;
    }
    if (end !== -1) ends.push(end);
    if (char.short === BACKSLASH) {
      if (bytes[at + 1] === BACKSLASH) ends.push(at + 2);
    } else if (char.short !== undefined) {
      const run = backslashRunEnd(bytes, at);
      if (bytes[run] === char.short) ends.push(run + 1);
    }
  }
  if (bytes[at] === PERCENT) {
    let end = at;
    for (const byte of utf8) {
      end = bytes[end] === PERCENT && hexAt(bytes, end + 1, 2) === byte ? end + 3 : -1;
      if (end === -1) break;
    }
    if (end !== -1) ends.push(end);
  }
  return ends;
}

/** Where the secret written at `at` (each character in any of its ways) ends, or -1. */
function matchAt(bytes: Uint8Array, at: number, chars: readonly SecretChar[], index = 0): number {
  if (index === chars.length) return at;
  // Usually one way fits or none; several only for a character such as `\` or `%` itself.
  for (const end of charEnds(bytes, at, chars[index]!)) {
    const found = matchAt(bytes, end, chars, index + 1);
    if (found !== -1) return found;
  }
  return -1;
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
 * of the secret, in order. Native searches hop to the next `%` and the next `\u00` (each searched again
 * only once passed, so the whole walk stays linear); the bytes after a hop are walked, since such
 * escapes come in runs (every accent of a text written `\u00e9`) where a native search costs more than
 * the few bytes between them.
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
          const high = hexValue(bytes[at + 1]);
          const low = hexValue(bytes[at + 2]);
          if (high !== -1 && low !== -1 && pattern.bytes[high * 16 + low] === 1) return at;
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
  for (let found = first.raw; found !== -1; found = bytes.indexOf(raw, found + 1)) spans.push([found, found + raw.length]);

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
 * short escapes, at any nesting depth of JSON in JSON strings) or percent-encoded (`%XX`), in any mix.
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
  const first: Found = { escape: bytes.indexOf(pattern.escapeNeedle), percent: bytes.indexOf(PERCENT), raw: bytes.indexOf(pattern.raw) };
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
