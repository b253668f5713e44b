import type { Finding } from './guardrail.ts';

/**
 * The text guardrails match, made from a raw text as a reader sees it: JSON escapes undone in JSON
 * text (tool-call arguments), then default-ignorable characters (zero-width spaces and joiners, soft
 * hyphens, bidirectional controls, variation selectors, tags) left out and the rest NFKC-normalised
 * (full-width letters and digits, ligatures, superscripts read as their plain forms). Each character
 * of the view knows the stretch of the raw text it comes from, so that a finding in the view maps back
 * to the raw characters to replace.
 */
export interface TextView {
  readonly text: string;
  /** Where the raw text of each view character starts and ends; undefined when the view is the raw text itself. */
  readonly starts: Int32Array | undefined;
  readonly ends: Int32Array | undefined;
  /** How much of the raw text the view covers: all of it, unless an unfinished escape at its end was left out. */
  readonly covered: number;
}

const IGNORABLE = /\p{Default_Ignorable_Code_Point}/u;
const IGNORABLE_RUNS = /(\p{Default_Ignorable_Code_Point}+)/u;
/** Characters that may join the one before them when normalised: marks, Hangul vowel and final jamo, voicing marks. */
const JOINING = String.raw`\p{M}\u1160-\u11ff\ud7b0-\ud7ff\uff9e\uff9f`;
/** A segment: a character with the ones that may join it, or such characters with none before them. */
const SEGMENTS = new RegExp(`[^${JOINING}][${JOINING}]*|[${JOINING}]+`, 'gu');
/** Joining characters and surrogates: a piece without them normalises character by character. */
const JOINERS_OR_PAIRS = new RegExp(String.raw`[${JOINING}\ud800-\udfff\u{10000}-\u{10ffff}]`, 'u');
/** A JSON escape: `\\uXXXX`, or a backslash and one of the characters it escapes. */
const ESCAPES = /\\(?:u([0-9a-fA-F]{4})|(["\\/bfnrt]))/g;
/** An escape cut off at the end of unfinished text. */
const CUT_ESCAPE = /\\(?:u[0-9a-fA-F]{0,3})?$/;
const ESCAPED: Readonly<Record<string, string>> = {
  '"': '"',
  '\\': '\\',
  '/': '/',
  b: '\b',
  f: '\f',
  n: '\n',
  r: '\r',
  t: '\t',
};
/** Normalised pieces of about this many characters are checked whole first (most come out unchanged). */
const PIECE_CHARS = 64;

/**
 * The view of `raw`. `json`: it is JSON text, whose escapes are undone. `finished`: no more text will
 * follow; otherwise an escape cut off at its end is left out of the view (`covered` says where it starts),
 * to be read whole with the text that completes it.
 */
export function textView(raw: string, json = false, finished = true): TextView {
  let covered = raw.length;
  let mapped: Mapped | undefined;
  if (json && raw.includes('\\')) ({ covered, ...mapped } = unescapeJson(raw, finished));
  const text = mapped?.text ?? raw;
  // Only text beyond ASCII can fold (its UTF-8 is longer than it): a native count, cheaper than a scan.
  if (Buffer.byteLength(text, 'utf8') !== text.length) {
    const stripped = strip(text);
    if (stripped) mapped = mapped ? compose(mapped, stripped) : stripped;
    const normal = normalise(stripped?.text ?? text);
    if (normal) mapped = mapped ? compose(mapped, normal) : normal;
  }
  return mapped ? { ...mapped, covered } : { text, starts: undefined, ends: undefined, covered };
}

/** The raw stretch `[start, end)` of the view characters `[from, to)` (`from < to`). */
export function rawSpan(view: TextView, from: number, to: number): [number, number] {
  return view.starts ? [view.starts[from]!, view.ends![to - 1]!] : [from, to];
}

/** Where the raw text of view character `index` starts (the covered end for an index past the view). */
export function rawStart(view: TextView, index: number): number {
  if (index < 0) return 0;
  if (index >= view.text.length) return view.covered;
  return view.starts ? view.starts[index]! : index;
}

/** How many view characters start before raw position `at`. */
export function viewIndex(view: TextView, at: number): number {
  if (!view.starts) return Math.min(at, view.text.length);
  let low = 0;
  let high = view.starts.length;
  while (low < high) {
    const middle = (low + high) >>> 1;
    if (view.starts[middle]! < at) low = middle + 1;
    else high = middle;
  }
  return low;
}

/**
 * Findings made on the view, as stretches of the raw text. In JSON text a replacement is written
 * JSON-escaped, so that the text stays the JSON it was.
 */
export function rawFindings(view: TextView, found: readonly Finding[], json: boolean): Finding[] {
  return found.map((finding) => {
    const [start, end] = rawSpan(view, finding.start, finding.end);
    const replacement = json ? JSON.stringify(finding.replacement).slice(1, -1) : finding.replacement;
    return start === finding.start && end === finding.end && replacement === finding.replacement
      ? finding
      : { start, end, replacement };
  });
}

/** A text made from another, and where each of its characters comes from there (`ends` exclusive). */
interface Mapped {
  readonly text: string;
  readonly starts: Int32Array;
  readonly ends: Int32Array;
}

/** A view being built: its text in pieces, and where each of its characters comes from. */
class Built {
  private readonly pieces: string[] = [];
  private size = 0;
  private startsAt: Int32Array;
  private endsAt: Int32Array;

  constructor(capacity: number) {
    this.startsAt = new Int32Array(capacity + 16);
    this.endsAt = new Int32Array(capacity + 16);
  }

  private room(count: number): void {
    if (this.size + count <= this.startsAt.length) return;
    const capacity = Math.max(this.startsAt.length * 2, this.size + count);
    const starts = new Int32Array(capacity);
    const ends = new Int32Array(capacity);
    starts.set(this.startsAt.subarray(0, this.size));
    ends.set(this.endsAt.subarray(0, this.size));
    this.startsAt = starts;
    this.endsAt = ends;
  }

  /** Appends characters that all come from the raw stretch `[start, end)`. */
  push(text: string, start: number, end: number): void {
    this.pieces.push(text);
    this.room(text.length);
    this.startsAt.fill(start, this.size, this.size + text.length);
    this.endsAt.fill(end, this.size, this.size + text.length);
    this.size += text.length;
  }

  /** Appends raw text as it is, from raw position `start`: each character from itself. */
  same(text: string, start: number): void {
    this.pieces.push(text);
    this.room(text.length);
    for (let index = 0; index < text.length; index++) {
      this.startsAt[this.size + index] = start + index;
      this.endsAt[this.size + index] = start + index + 1;
    }
    this.size += text.length;
  }

  done(): Mapped {
    const { pieces, size } = this;
    return { text: pieces.join(''), starts: this.startsAt.subarray(0, size), ends: this.endsAt.subarray(0, size) };
  }
}

/** JSON text with its escapes undone, each character mapped to its escape or itself. */
function unescapeJson(raw: string, finished: boolean): Mapped & { readonly covered: number } {
  const built = new Built(raw.length);
  let at = 0;
  ESCAPES.lastIndex = 0;
  // A backslash that starts no escape (`\q`) reads as itself.
  for (let match = ESCAPES.exec(raw); match !== null; match = ESCAPES.exec(raw)) {
    built.same(raw.slice(at, match.index), at);
    at = match.index + match[0].length;
    built.push(
      match[1] === undefined ? ESCAPED[match[2]!]! : String.fromCharCode(Number.parseInt(match[1], 16)),
      match.index,
      at,
    );
  }
  let covered = raw.length;
  const cut = finished ? null : CUT_ESCAPE.exec(raw.slice(at));
  if (cut) covered = at + cut.index;
  built.same(raw.slice(at, covered), at);
  return { ...built.done(), covered };
}

/** `inner` (a view of `outer`'s text) as a view of `outer`'s raw text. */
function compose(outer: Mapped, inner: Mapped): Mapped {
  return {
    text: inner.text,
    starts: inner.starts.map((at) => outer.starts[at]!),
    ends: inner.ends.map((at) => outer.ends[at - 1]!),
  };
}

/** The text without its default-ignorable characters, each character mapped to itself; undefined when it has none. */
function strip(text: string): Mapped | undefined {
  if (!IGNORABLE.test(text)) return undefined;
  const built = new Built(text.length);
  // Kept runs and the ignorable runs between them, alternately.
  const runs = text.split(IGNORABLE_RUNS);
  let at = 0;
  for (let index = 0; index < runs.length; index++) {
    if (index % 2 === 0) built.same(runs[index]!, at);
    at += runs[index]!.length;
  }
  return built.done();
}

/**
 * The text NFKC-normalised, each character mapped to the segment it comes from (a character and those
 * that join it); undefined when that is the text itself. Normalised a piece at a time, and a segment at
 * a time in a piece that changes; where that would differ from normalising the whole (a composition
 * this segmentation does not foresee), the whole text is one stretch.
 */
function normalise(text: string): Mapped | undefined {
  const whole = text.normalize('NFKC');
  if (whole === text) return undefined;
  const built = new Built(text.length);
  // Segments repeat (a text made of a few odd characters): each is normalised once.
  const seen = new Map<string, string>();
  for (let at = 0; at < text.length;) {
    const end = pieceEnd(text, at);
    const piece = text.slice(at, end);
    const normal = piece.normalize('NFKC');
    // Unchanged, or changed one character for one (full-width forms): each character from itself.
    if (normal === piece || (normal.length === piece.length && !JOINERS_OR_PAIRS.test(piece))) built.same(normal, at);
    else {
      // A piece ends before a character that starts a segment: its segments end in it.
      SEGMENTS.lastIndex = at;
      for (let match = SEGMENTS.exec(text); match !== null && match.index < end; match = SEGMENTS.exec(text)) {
        const segment = match[0];
        let folded = segment.length === 1 && segment.charCodeAt(0) < 0x80 ? segment : seen.get(segment);
        if (folded === undefined) seen.set(segment, (folded = segment.normalize('NFKC')));
        if (folded === segment) built.same(segment, match.index);
        else built.push(folded, match.index, match.index + segment.length);
        if (SEGMENTS.lastIndex >= end) break;
      }
    }
    at = end;
  }
  const made = built.done();
  if (made.text === whole) return made;
  const fallback = new Built(whole.length);
  fallback.push(whole, 0, text.length);
  return fallback.done();
}

/**
 * Where a piece starting at `at` ends: after about {@link PIECE_CHARS} characters, before a character
 * that never joins the one before it (Latin-1 and spacing letters, CJK ideographs, Hangul syllables), so
 * that pieces normalise independently.
 */
function pieceEnd(text: string, at: number): number {
  let end = Math.min(text.length, at + PIECE_CHARS);
  while (end < text.length) {
    const code = text.charCodeAt(end);
    if (code < 0x300 || (code >= 0x4e00 && code <= 0x9fff) || (code >= 0xac00 && code <= 0xd7a3)) break;
    end++;
  }
  return end;
}
