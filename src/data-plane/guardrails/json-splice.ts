import type { JsonPath } from '../../core/formats/format-reading.ts';

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const isSpace = (byte: number | undefined) => byte === 0x20 || byte === 0x0a || byte === 0x0d || byte === 0x09;

/** A trie of the paths sought: a node per key on the way, the index of the path ending there (for a value or a key). */
interface PathNode {
  readonly children: Map<string, PathNode>;
  index?: number;
  keyIndex?: number;
}

/**
 * Where the values at `paths` sit in the bytes of a JSON document (one `JSON.parse` accepts): for each
 * path, `[start, end)` of its value (of its member's name, where `keys` marks it), or undefined when the
 * document has none there. A key given twice counts as `JSON.parse` reads it: the last one. One pass,
 * descending only where a sought path leads, stepping over everything else by its brackets and quotes.
 */
export function locateValues(
  bytes: Uint8Array,
  paths: readonly JsonPath[],
  keys?: readonly (boolean | undefined)[],
): ([number, number] | undefined)[] {
  const root: PathNode = { children: new Map() };
  paths.forEach((path, index) => {
    let node = root;
    for (const key of path) {
      let child = node.children.get(String(key));
      if (!child) node.children.set(String(key), (child = { children: new Map() }));
      node = child;
    }
    if (keys?.[index]) node.keyIndex = index;
    else node.index = index;
  });
  const found: ([number, number] | undefined)[] = paths.map(() => undefined);
  const reader = new Reader(bytes, found);
  reader.value(reader.skipSpace(0), root);
  return found;
}

class Reader {
  constructor(
    private readonly bytes: Uint8Array,
    private readonly found: ([number, number] | undefined)[],
  ) {}

  skipSpace(at: number): number {
    while (isSpace(this.bytes[at])) at++;
    return at;
  }

  /** Reads the value at `at` (sought along `node` when given); returns where it ends. */
  value(at: number, node: PathNode | undefined): number {
    const byte = this.bytes[at];
    let end: number;
    if (node && node.children.size > 0 && byte === 0x7b) end = this.object(at, node);
    else if (node && node.children.size > 0 && byte === 0x5b) end = this.array(at, node);
    else end = this.skip(at);
    if (node?.index !== undefined) this.found[node.index] = [at, end];
    return end;
  }

  private object(at: number, node: PathNode): number {
    at = this.skipSpace(at + 1);
    if (this.bytes[at] === 0x7d) return at + 1;
    for (;;) {
      const keyEnd = this.stringEnd(at);
      const key = JSON.parse(
        Buffer.from(this.bytes.buffer, this.bytes.byteOffset + at, keyEnd - at).toString('utf8'),
      ) as string;
      const child = node.children.get(key);
      if (child?.keyIndex !== undefined) this.found[child.keyIndex] = [at, keyEnd];
      at = this.skipSpace(this.skipSpace(keyEnd) + 1);
      at = this.skipSpace(this.value(at, child));
      if (this.bytes[at] === 0x7d) return at + 1;
      at = this.skipSpace(at + 1);
    }
  }

  private array(at: number, node: PathNode): number {
    at = this.skipSpace(at + 1);
    if (this.bytes[at] === 0x5d) return at + 1;
    for (let index = 0; ; index++) {
      at = this.skipSpace(this.value(at, node.children.get(String(index))));
      if (this.bytes[at] === 0x5d) return at + 1;
      at = this.skipSpace(at + 1);
    }
  }

  /** One past the string opening at `at`. */
  private stringEnd(at: number): number {
    const { bytes } = this;
    let from = at + 1;
    for (;;) {
      const quote = bytes.indexOf(QUOTE, from);
      if (quote < 0) return bytes.length;
      let backslashes = 0;
      for (let index = quote - 1; index > at && bytes[index] === BACKSLASH; index--) backslashes++;
      if (backslashes % 2 === 0) return quote + 1;
      from = quote + 1;
    }
  }

  /** One past any value at `at`, without reading inside it (iteratively, whatever its depth). */
  private skip(at: number): number {
    const { bytes } = this;
    const first = bytes[at];
    if (first === QUOTE) return this.stringEnd(at);
    if (first !== 0x7b && first !== 0x5b) {
      while (at < bytes.length && !isSpace(bytes[at]) && bytes[at] !== 0x2c && bytes[at] !== 0x7d && bytes[at] !== 0x5d)
        at++;
      return at;
    }
    let depth = 0;
    for (;;) {
      const byte = bytes[at];
      if (byte === QUOTE) {
        at = this.stringEnd(at);
        continue;
      }
      if (byte === 0x7b || byte === 0x5b) depth++;
      else if (byte === 0x7d || byte === 0x5d) {
        depth--;
        if (depth === 0) return at + 1;
      }
      at++;
    }
  }
}

/** `bytes` with each `[start, end)` replaced by its text's UTF-8 (ranges not overlapping). */
export function spliceBytes(
  bytes: Buffer,
  replacements: readonly { readonly start: number; readonly end: number; readonly text: string }[],
): Buffer {
  const sorted = [...replacements].sort((a, b) => a.start - b.start);
  const parts: Buffer[] = [];
  let at = 0;
  for (const { start, end, text } of sorted) {
    parts.push(bytes.subarray(at, start), Buffer.from(text, 'utf8'));
    at = end;
  }
  parts.push(bytes.subarray(at));
  return Buffer.concat(parts);
}

/**
 * A JSON document's bytes with the strings at `paths` (the member names, for a change marked `key`) set
 * to new texts (JSON-encoded), everything else byte for byte as it was. A path the document does not
 * hold is left out.
 */
export function replaceStrings(
  bytes: Buffer,
  changes: readonly { readonly path: JsonPath; readonly text: string; readonly key?: boolean }[],
): Buffer {
  if (changes.length === 0) return bytes;
  const spans = locateValues(
    bytes,
    changes.map((change) => change.path),
    changes.map((change) => change.key),
  );
  const replacements = changes.flatMap((change, index) => {
    const span = spans[index];
    return span ? [{ start: span[0], end: span[1], text: JSON.stringify(change.text) }] : [];
  });
  return spliceBytes(bytes, replacements);
}
