import type { Finding, TextContext, TextGuardrail } from './guardrail.ts';

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

/**
 * Findings sorted by start and merged where they overlap (or touch nothing twice): one stretch per
 * merged group, with the replacement of its earliest finding.
 */
export function mergeFindings(findings: readonly Finding[]): Finding[] {
  if (findings.length <= 1) return [...findings];
  const sorted = [...findings].sort((a, b) => a.start - b.start || b.end - a.end);
  const merged: Finding[] = [];
  for (const finding of sorted) {
    const last = merged[merged.length - 1];
    if (last && finding.start < last.end) {
      if (finding.end > last.end) merged[merged.length - 1] = { ...last, end: finding.end };
    } else merged.push(finding);
  }
  return merged;
}

/** `text` with each merged finding replaced. */
export function redactText(text: string, merged: readonly Finding[]): string {
  let out = '';
  let at = 0;
  for (const finding of merged) {
    out += text.slice(at, finding.start) + finding.replacement;
    at = finding.end;
  }
  return out + text.slice(at);
}

/** What the text guardrails make of one whole text. */
export type TextVerdict =
  | { readonly kind: 'pass' }
  | { readonly kind: 'block'; readonly guardrail: string }
  /** The text with every finding of the redacting guardrails replaced, and which of them found something. */
  | { readonly kind: 'redact'; readonly text: string; readonly guardrails: readonly string[] };

const PASS: TextVerdict = { kind: 'pass' };

/** A guardrail's findings in a text's view, as stretches of the text itself. */
export function findIn(guardrail: TextGuardrail, view: TextView, context: TextContext, json = false) {
  const found = guardrail.find(view.text, context);
  return found.length === 0 || (!view.starts && !json) ? found : rawFindings(view, found, json);
}

/**
 * Runs each guardrail on a whole text (a request's text, a JSON answer's, a finished part of a stream),
 * matched on its view (see {@link textView}; `json`: the text is JSON text, its escapes undone first):
 * the first blocking guardrail (in configuration order) with a finding blocks; otherwise the findings
 * of the redacting ones, merged, are replaced in one pass over the text as it came.
 */
export function checkText(
  text: string,
  guardrails: readonly TextGuardrail[],
  context: TextContext,
  json = false,
): TextVerdict {
  if (text === '') return PASS;
  const view = textView(text, json);
  let redactions: Finding[] | undefined;
  let redactors: string[] | undefined;
  for (const guardrail of guardrails) {
    const found = findIn(guardrail, view, context, json);
    if (found.length === 0) continue;
    if (guardrail.action === 'block') return { kind: 'block', guardrail: guardrail.name };
    (redactions ??= []).push(...found);
    (redactors ??= []).push(guardrail.name);
  }
  if (!redactions) return PASS;
  return { kind: 'redact', text: redactText(text, mergeFindings(redactions)), guardrails: redactors! };
}

/**
 * Every finding's replacement placed in the segment where the finding starts, and its text cut out of
 * every segment it covers: the segments' new texts. `segments` are consecutive stretches of one text
 * (`[start, end)` in its coordinates, each with its own text), `merged` sorted findings within them.
 */
export function redactAcross(
  segments: readonly { readonly start: number; readonly end: number; readonly text: string }[],
  merged: readonly Finding[],
): string[] {
  const out: string[] = [];
  let next = 0;
  for (const { start, end, text } of segments) {
    let piece = '';
    let at = start;
    while (at < end) {
      while (next < merged.length && merged[next]!.end <= at) next++;
      const finding = merged[next];
      if (!finding || finding.start >= end) {
        piece += text.slice(at - start);
        break;
      }
      if (finding.start > at) {
        piece += text.slice(at - start, finding.start - start);
        at = finding.start;
      }
      if (at === finding.start) piece += finding.replacement;
      at = Math.min(end, finding.end);
    }
    out.push(piece);
  }
  return out;
}

/** One piece of text an event of a stream carries. */
export interface StreamPiece {
  /** Which text it belongs to: one choice's content, one content block, one output part (`<group>|<what>`). */
  readonly channel: string;
  /** Its text as the upstream sent it. */
  readonly text: string;
  /** Whether its channel's text is JSON text (tool-call arguments), matched with its escapes undone. */
  readonly json?: boolean;
  /** Replaces its text in its event (which is then written anew). */
  set(text: string): void;
}

/** What the guard needs to know of one event of a stream. */
export interface StreamItem {
  /** Text deltas: each continues its channel's text. */
  readonly deltas: readonly StreamPiece[];
  /** Whole texts (a finished part's full text, repeated at its end), each checked on its own. */
  readonly wholes: readonly StreamPiece[];
  /** Groups whose channels this event ends (`choice 0`: every channel named `choice 0|…`). */
  readonly closes: readonly string[];
}

/** What one step of the guard lets out: events to write now, in order, or the guardrail that blocked. */
export interface StreamStep<T> {
  readonly released: readonly T[];
  readonly blocked?: string;
}

/** A held event and how many of its deltas are not released yet. */
interface Entry<T> {
  readonly item: T;
  pending: number;
}

interface HeldDelta<T> {
  readonly piece: StreamPiece;
  readonly entry: Entry<T>;
  /** Its text as it came (the piece's own may be redacted since). */
  readonly text: string;
}

/** One channel's text: the end of what went out (for lookbehinds), the deltas held back, whether it is JSON text. */
interface Channel<T> {
  context: string;
  held: HeldDelta<T>[];
  readonly json: boolean;
}

/** The most raw characters of context a channel keeps, in windows (more than its view's last window when padded). */
const CONTEXT_WINDOWS = 8;

/**
 * Most characters held back over every channel at once: past it (a stream whose other choices pile up
 * behind one that went quiet) the held text is judged as if its channels had ended.
 */
export const MAX_HELD_CHARS = 1024 * 1024;

/**
 * Runs text guardrails over a stream, exactly across its events. Each channel's text is read through a
 * window: of what came, all but the last `window - 1` characters (the longest finding, less one) can no
 * longer be part of a finding still to complete, so those go out at once and the rest is held with the
 * events carrying it. A finding is acted on only once it is settled (at least `window - 1` characters
 * follow it, or its channel ended), so that a stream ends as its whole text would have been judged:
 * a blocking finding blocks before any of it went out (`blocked`), a redacting one is replaced inside
 * the events that carry it (its replacement in the event where it starts). Events leave in the order
 * they came; one is held while any of its text is. Whole texts (a part's full text at its end) are
 * judged whole as they come.
 *
 * Pure: no I/O, no clock. Cost per event: the guardrails run on its channel's held text and window
 * (at most about twice the window), and only once at least one character could be let out.
 */
export class StreamGuard<T extends StreamItem> {
  private readonly queue: Entry<T>[] = [];
  private readonly channels = new Map<string, Channel<T>>();
  private readonly window: number;
  private heldChars = 0;
  /** The redacting guardrails that found something so far. */
  readonly redactedBy = new Set<string>();

  constructor(
    private readonly guardrails: readonly TextGuardrail[],
    private readonly context: TextContext,
    private readonly maxHeldChars = MAX_HELD_CHARS,
  ) {
    this.window = Math.max(1, ...guardrails.map((guardrail) => guardrail.window));
  }

  /** The events held back right now, in order (what a block drops). */
  heldItems(): T[] {
    return this.queue.map((entry) => entry.item);
  }

  /** Characters held back right now (tests, diagnostics). */
  get held(): number {
    return this.heldChars;
  }

  push(item: T): StreamStep<T> {
    const entry: Entry<T> = { item, pending: 0 };
    for (const whole of item.wholes) {
      const verdict = checkText(whole.text, this.guardrails, this.context, whole.json);
      if (verdict.kind === 'block') return { released: [], blocked: verdict.guardrail };
      if (verdict.kind === 'redact') {
        whole.set(verdict.text);
        for (const name of verdict.guardrails) this.redactedBy.add(name);
      }
    }
    // Few names per event (one delta, at most a close): lists, not sets.
    const touched: string[] = [];
    for (const piece of item.deltas) {
      if (piece.text === '') continue;
      let channel = this.channels.get(piece.channel);
      if (!channel) this.channels.set(piece.channel, (channel = { context: '', held: [], json: piece.json === true }));
      channel.held.push({ piece, entry, text: piece.text });
      entry.pending++;
      this.heldChars += piece.text.length;
      if (!touched.includes(piece.channel)) touched.push(piece.channel);
    }
    this.queue.push(entry);
    const ended: string[] = [];
    for (const group of item.closes)
      for (const name of this.channels.keys()) if (name.startsWith(`${group}|`)) ended.push(name);
    for (const name of ended) if (!touched.includes(name)) touched.push(name);
    for (const name of touched) {
      const blocked = this.judge(name, ended.includes(name));
      if (blocked) return { released: [], blocked };
    }
    if (this.heldChars > this.maxHeldChars) {
      for (const name of [...this.channels.keys()]) {
        const blocked = this.judge(name, true);
        if (blocked) return { released: [], blocked };
      }
    }
    return { released: this.releasable() };
  }

  /** The stream ended: every channel is judged whole, and everything held goes out (or is blocked). */
  end(): StreamStep<T> {
    for (const name of [...this.channels.keys()]) {
      const blocked = this.judge(name, true);
      if (blocked) return { released: [], blocked };
    }
    return { released: this.releasable() };
  }

  /** The events at the head of the queue none of whose text is held any more. */
  private releasable(): T[] {
    let count = 0;
    while (count < this.queue.length && this.queue[count]!.pending === 0) count++;
    return this.queue.splice(0, count).map((entry) => entry.item);
  }

  /**
   * Judges one channel's held text after its context, on its view (so the window counts characters as
   * they are matched): blocks on a settled blocking finding, else lets out the deltas before the release
   * point (with their settled redactions made). `ended`: the channel's text is complete (every finding
   * settles), and the channel is forgotten.
   */
  private judge(name: string, ended: boolean): string | undefined {
    const channel = this.channels.get(name)!;
    if (ended) this.channels.delete(name);
    const { context, held, json } = channel;
    if (held.length === 0) return undefined;
    const base = context.length;
    let heldText = '';
    const bounds: number[] = [base];
    for (const delta of held) {
      heldText += delta.text;
      bounds.push(base + heldText.length);
    }
    const text = context + heldText;
    const view = textView(text, json, ended);
    // Past `settle` (the view's last `window - 1` characters), a finding could still grow or change with text to come.
    const settle = ended ? text.length : rawStart(view, view.text.length - (this.window - 1));
    if (!ended && settle <= base) return undefined;
    const found = this.findingsIn(view, json, base, settle);
    if (typeof found === 'string') return found;
    const { redactions, unsettled, redactors } = found;
    const merged = mergeFindings(redactions);
    const release = releasePoint(settle, merged, unsettled, bounds, base);
    const count = bounds.indexOf(release);
    if (count <= 0) {
      if (ended) throw new Error('a finished channel must release all of its text');
      return undefined;
    }
    const released = held.slice(0, count);
    const applied = merged.filter((finding) => finding.end <= release);
    if (applied.length > 0) {
      const segments = released.map((delta, index) => ({
        start: bounds[index]!,
        end: bounds[index + 1]!,
        text: delta.text,
      }));
      const texts = redactAcross(segments, applied);
      released.forEach((delta, index) => {
        if (texts[index] !== delta.text) delta.piece.set(texts[index]!);
      });
      for (const { name, ends } of redactors) if (ends.some((end) => end <= release)) this.redactedBy.add(name);
    }
    for (const delta of released) {
      delta.entry.pending--;
      this.heldChars -= delta.text.length;
    }
    channel.context = text.slice(this.contextStart(view, release), release);
    channel.held = held.slice(count);
    return undefined;
  }

  /**
   * Every guardrail's findings in the held text (what ends in the context went out already): the name of
   * a blocking guardrail whose finding settled, else the redactions, the findings not settled yet, and
   * where each redacting guardrail's findings end.
   */
  private findingsIn(view: TextView, json: boolean, base: number, settle: number): string | HeldFindings {
    const redactions: Finding[] = [];
    const unsettled: Finding[] = [];
    const redactors: { readonly name: string; readonly ends: number[] }[] = [];
    for (const guardrail of this.guardrails) {
      const ends: number[] = [];
      if (guardrail.action === 'redact') redactors.push({ name: guardrail.name, ends });
      for (const found of findIn(guardrail, view, this.context, json)) {
        // A finding reaching into the context (longer than the window) is cut at the context's end.
        if (found.end <= base) continue;
        const finding = found.start < base ? { ...found, start: base } : found;
        if (guardrail.action === 'block') {
          if (finding.end <= settle) return guardrail.name;
          unsettled.push(finding);
        } else {
          redactions.push(finding);
          ends.push(finding.end);
          if (finding.end > settle) unsettled.push(finding);
        }
      }
    }
    return { redactions, unsettled, redactors };
  }

  /** Where the context kept after `release` starts: the view's last window before it, at a view character's start. */
  private contextStart(view: TextView, release: number): number {
    const index = viewIndex(view, release);
    let start = rawStart(view, index - this.window);
    const longest = this.window * CONTEXT_WINDOWS;
    if (release - start > longest) start = rawStart(view, viewIndex(view, release - longest));
    return Math.min(start, release);
  }
}

/** What a channel's held text holds, short of a settled block. */
interface HeldFindings {
  readonly redactions: Finding[];
  /** Findings that could still grow or change with text to come (past the settle point). */
  readonly unsettled: Finding[];
  readonly redactors: readonly { readonly name: string; readonly ends: number[] }[];
}

/** The release point: at most `settle`, never inside a finding, and on a boundary between deltas. */
function releasePoint(
  settle: number,
  merged: readonly Finding[],
  unsettled: readonly Finding[],
  bounds: readonly number[],
  base: number,
): number {
  let release = settle;
  for (;;) {
    for (const finding of merged) if (finding.start < release && finding.end > release) release = finding.start;
    for (const finding of unsettled) if (finding.start < release) release = finding.start;
    let boundary = base;
    for (const bound of bounds) if (bound <= release) boundary = bound;
    if (boundary === release) return release;
    release = boundary;
  }
}
