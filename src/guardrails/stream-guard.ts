import { checkText, findIn, mergeFindings, redactAcross } from './findings.ts';
import type { Finding, TextContext, TextGuardrail } from './guardrail.ts';
import { rawStart, textView, viewIndex, type TextView } from './text-view.ts';

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
