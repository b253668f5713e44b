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
