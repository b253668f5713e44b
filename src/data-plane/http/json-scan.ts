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
  | { readonly kind: 'object'; readonly members: readonly JsonMember[]; /** One past the closing brace. */ readonly end: number }
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

/**
 * One linear, non-recursive pass over the object that opens at `start` (whitespace before it skipped):
 * where each of its own members' values sits, and the nesting depth and element count checked on the
 * way, stopping at the first limit passed. Well-formed JSON is always read right; other input may come
 * out as `malformed` or as a wrong layout, so callers still parse the bytes with `JSON.parse`.
 */
export function scanObject(bytes: Buffer, start: number, limits: JsonLimits): ObjectScan {
  const length = bytes.length;
  let index = start;
  while (index < length && isSpace(bytes[index]!)) index++;
  if (bytes[index] !== OPEN_BRACE) return { kind: 'malformed' };

  const members: JsonMember[] = [];
  let depth = 0;
  let elements = 0;
  // A container just opened: the next token, unless it closes the container, is its first element.
  let fresh = false;
  let expect = Expect.KeyOrEnd;
  let key: string | undefined;
  let valueStart = -1;
  let lastByte = -1;

  for (; index < length; index++) {
    const byte = bytes[index]!;
    if (isSpace(byte)) continue;
    if (byte === CLOSE_BRACE || byte === CLOSE_BRACKET) {
      fresh = false;
      depth--;
      if (depth === 0) {
        if (byte !== CLOSE_BRACE) return { kind: 'malformed' };
        if (expect === Expect.InValue) members.push({ key: key!, valueStart, valueEnd: lastByte + 1 });
        else if (expect !== Expect.KeyOrEnd) return { kind: 'malformed' };
        return { kind: 'object', members, end: index + 1 };
      }
      if (depth < 0) return { kind: 'malformed' };
      lastByte = index;
      continue;
    }
    if (byte === COMMA) {
      if (depth === 1) {
        if (expect !== Expect.InValue) return { kind: 'malformed' };
        members.push({ key: key!, valueStart, valueEnd: lastByte + 1 });
        expect = Expect.Key;
      }
      if (++elements > limits.maxElements) return { kind: 'too-many-elements' };
      continue;
    }
    if (byte === COLON) {
      if (depth === 1) {
        if (expect !== Expect.Colon) return { kind: 'malformed' };
        expect = Expect.Value;
      }
      continue;
    }
    // A token starts here: a string, a container, or a scalar's first byte.
    if (fresh) {
      fresh = false;
      if (++elements > limits.maxElements) return { kind: 'too-many-elements' };
    }
    if (depth === 1) {
      if (expect === Expect.KeyOrEnd || expect === Expect.Key) {
        if (byte !== QUOTE) return { kind: 'malformed' };
        const end = stringEnd(bytes, index);
        if (end < 0) return { kind: 'malformed' };
        key = decodeKey(bytes, index, end);
        if (key === undefined) return { kind: 'malformed' };
        expect = Expect.Colon;
        index = lastByte = end;
        continue;
      }
      if (expect === Expect.Value) {
        valueStart = index;
        expect = Expect.InValue;
      } else if (expect !== Expect.InValue || (byte === QUOTE || byte === OPEN_BRACE || byte === OPEN_BRACKET)) {
        // A second value with no comma before it.
        return { kind: 'malformed' };
      }
    }
    if (byte === QUOTE) {
      const end = stringEnd(bytes, index);
      if (end < 0) return { kind: 'malformed' };
      index = lastByte = end;
      continue;
    }
    if (byte === OPEN_BRACE || byte === OPEN_BRACKET) {
      if (++depth > limits.maxDepth) return { kind: 'too-deep' };
      fresh = true;
    }
    lastByte = index;
  }
  return { kind: 'malformed' };
}
