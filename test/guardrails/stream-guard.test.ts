import { expect } from 'chai';
import fc from 'fast-check';
import {
  checkText,
  StreamGuard,
  type StreamItem,
  type StreamPiece,
  rawSpan,
  textView,
} from '../../src/guardrails/text-engine.ts';
import type { TextContext, TextGuardrail } from '../../src/guardrails/guardrail.ts';
import { piiGuardrail } from '../../src/guardrails/pii-guardrail.ts';
import { regexGuardrail } from '../../src/guardrails/regex-guardrail.ts';

const CONTEXT: TextContext = { phase: 'response', route: 'chat-completions', model: 'alpha/gen-5.5' };
const BOTH = { request: true, response: true };

/** An event of one text delta on one channel; its text as the client gets it. */
class Event implements StreamItem {
  text: string;
  readonly deltas: StreamPiece[];
  readonly wholes: StreamPiece[] = [];
  readonly closes: string[];

  constructor(delta: string, closes: string[] = [], channel = 'choice 0|content', json = false) {
    this.text = delta;
    this.deltas = [{ channel, text: delta, json, set: (text) => (this.text = text) }];
    this.closes = closes;
  }
}

/**
 * Runs the pieces through a guard as one stream (the last one ends the channel, or the stream ends): what
 * the client gets. `json`: the channel's text is JSON text (a tool call's arguments).
 */
function stream(
  guardrails: TextGuardrail[],
  pieces: readonly string[],
  close: boolean,
  json = false,
): { text: string; blocked?: string; events: number } {
  const guard = new StreamGuard<Event>(guardrails, CONTEXT);
  let text = '';
  let events = 0;
  const take = (released: readonly Event[]) => {
    for (const event of released) text += event.text;
    events += released.length;
  };
  for (const [index, piece] of pieces.entries()) {
    const closes = close && index === pieces.length - 1 ? ['choice 0'] : [];
    const step = guard.push(new Event(piece, closes, json ? 'choice 0|tool 0' : 'choice 0|content', json));
    take(step.released);
    if (step.blocked) return { text, blocked: step.blocked, events };
  }
  const last = guard.end();
  take(last.released);
  return { text, blocked: last.blocked, events };
}

/** `text` cut at the given points (sorted, deduplicated, inside it). */
function cut(text: string, points: readonly number[]): string[] {
  const at = [...new Set(points.map((point) => point % (text.length + 1)))].sort((a, b) => a - b);
  const pieces: string[] = [];
  let from = 0;
  for (const point of at) {
    if (point > from) pieces.push(text.slice(from, point));
    from = Math.max(from, point);
  }
  if (from < text.length) pieces.push(text.slice(from));
  return pieces.length ? pieces : [text];
}

const codes = (action: 'block' | 'redact') =>
  regexGuardrail(
    { name: 'no-codes', use: 'regex', on: 'response', action, patterns: ['PROJECT-[0-9]{4}'], ignoreCase: false },
    BOTH,
  );
const pii = (action: 'block' | 'redact') =>
  piiGuardrail({ name: 'pii', use: 'pii', on: 'both', action, entities: ['email', 'card', 'secret'] }, BOTH);

/** Text near the pattern: its letters, digits and separators, so that near misses are common. */
const noise = fc.string({ unit: fc.constantFrom(...'PROJECT-0123456789 abc@.x'.split('')), maxLength: 60 });

describe('guardrails: the stream guard, exact across events', () => {
  it('catches a planted match however the text is cut into events, and lets none of it out', () => {
    fc.assert(
      fc.property(
        noise,
        fc.integer({ min: 0, max: 9999 }),
        noise,
        fc.array(fc.nat(200), { maxLength: 20 }),
        fc.boolean(),
        (before, code, after, points, close) => {
          const match = `PROJECT-${String(code).padStart(4, '0')}`;
          const text = `${before}${match}${after}`;
          const first = /PROJECT-[0-9]{4}/.exec(text)!.index;
          const result = stream([codes('block')], cut(text, points), close);
          expect(result.blocked).to.equal('no-codes');
          // Nothing of the first match reached the client.
          expect(result.text.length).to.be.at.most(first);
          expect(text.startsWith(result.text)).to.equal(true);
        },
      ),
      { numRuns: 500 },
    );
  });

  it('passes a text without a match unchanged, event for event', () => {
    fc.assert(
      fc.property(noise, fc.array(fc.nat(200), { maxLength: 20 }), fc.boolean(), (text, points, close) => {
        fc.pre(!/PROJECT-[0-9]{4}/.test(text));
        const pieces = cut(text, points);
        const result = stream([codes('block')], pieces, close);
        expect(result.blocked).to.equal(undefined);
        expect(result.text).to.equal(text);
        expect(result.events).to.equal(pieces.length);
      }),
      { numRuns: 500 },
    );
  });

  it('redacts a stream exactly as the whole text would be redacted, however it is cut', () => {
    for (const guardrail of [codes('redact'), pii('redact')]) {
      fc.assert(
        fc.property(
          noise,
          fc.constantFrom('PROJECT-1234', 'ada@example.com', '4111 1111 1111 1111', 'sk-abcdefghijklmnopqrstuvwx', ''),
          noise,
          fc.array(fc.nat(200), { maxLength: 20 }),
          fc.boolean(),
          (before, planted, after, points, close) => {
            const text = `${before}${planted}${after}`;
            const whole = checkText(text, [guardrail], CONTEXT);
            const result = stream([guardrail], cut(text, points), close);
            expect(result.blocked).to.equal(undefined);
            expect(result.text).to.equal(whole.kind === 'redact' ? whole.text : text);
          },
        ),
        { numRuns: 300 },
      );
    }
  });

  it('blocks a stream exactly when the whole text would be blocked, with pii', () => {
    fc.assert(
      fc.property(
        noise,
        fc.constantFrom('ada@example.com', '4111-1111-1111-1111', 'sk-proj-abcdefghijklmnop1234', ''),
        noise,
        fc.array(fc.nat(200), { maxLength: 20 }),
        (before, planted, after, points) => {
          const text = `${before} ${planted} ${after}`;
          const whole = checkText(text, [pii('block')], CONTEXT);
          const result = stream([pii('block')], cut(text, points), false);
          expect(result.blocked).to.equal(whole.kind === 'block' ? 'pii' : undefined);
          if (!result.blocked) expect(result.text).to.equal(text);
        },
      ),
      { numRuns: 300 },
    );
  });

  it('holds back at most the window less one character, and lets the rest out at once', () => {
    const guard = new StreamGuard<Event>([codes('block')], CONTEXT);
    // The window of PROJECT-[0-9]{4} is 12: an event goes out once 11 characters came after it.
    const step = guard.push(new Event('a'.repeat(30)));
    expect(step.released).to.have.length(0);
    expect(guard.held).to.equal(30);
    expect(guard.push(new Event('b'.repeat(10))).released).to.have.length(0);
    const next = guard.push(new Event('c'));
    expect(next.released.map((event) => event.text)).to.deep.equal(['a'.repeat(30)]);
    expect(guard.held).to.equal(11);
    expect(guard.push(new Event('d'.repeat(11))).released.map((event) => event.text)).to.deep.equal([
      'b'.repeat(10),
      'c',
    ]);
    expect(guard.end().released.map((event) => event.text)).to.deep.equal(['d'.repeat(11)]);
  });

  /** Noise with characters a reader folds or does not see: full-width forms, zero-width ones, a soft hyphen, a mark. */
  const folding = fc.string({
    unit: fc.constantFrom(...'PROJECT-0123456789 abc@.xＰＲ－１２ﬁ\u200b\u200d\u00ad\u0301'),
    maxLength: 60,
  });
  /** The code written in forms a reader reads as it. */
  const disguised = fc.constantFrom(
    'PROJECT-1234',
    'ＰＲＯＪＥＣＴ－１２３４',
    'PRO\u200bJECT-1\u20602\u200d34',
    'P\u00adROJECT\uff0d1234',
  );

  // Text is matched NFKC-normalised, invisible characters left out.
  it('catches the code in any form that reads as it, however it is cut, and lets none of it out', () => {
    fc.assert(
      fc.property(
        folding,
        disguised,
        folding,
        fc.array(fc.nat(300), { maxLength: 20 }),
        fc.boolean(),
        (before, code, after, points, close) => {
          const text = `${before}${code}${after}`;
          const view = textView(text);
          const first = /PROJECT-[0-9]{4}/.exec(view.text)!;
          const [start] = rawSpan(view, first.index, first.index + first[0].length);
          const result = stream([codes('block')], cut(text, points), close);
          expect(result.blocked).to.equal('no-codes');
          expect(result.text.length).to.be.at.most(start);
          expect(text.startsWith(result.text)).to.equal(true);
        },
      ),
      { numRuns: 500 },
    );
  });

  it('redacts and blocks a stream with such text exactly as the whole text, however it is cut', () => {
    for (const guardrail of [codes('redact'), pii('redact'), codes('block'), pii('block')]) {
      fc.assert(
        fc.property(
          folding,
          fc.constantFrom('ＰＲＯＪＥＣＴ－１２３４', 'ａｄａ＠ｅｘａｍｐｌｅ．ｃｏｍ', 'ada@exa\u200bmple.com', ''),
          folding,
          fc.array(fc.nat(300), { maxLength: 20 }),
          fc.boolean(),
          (before, planted, after, points, close) => {
            const text = `${before}${planted}${after}`;
            const whole = checkText(text, [guardrail], CONTEXT);
            const result = stream([guardrail], cut(text, points), close);
            expect(result.blocked).to.equal(whole.kind === 'block' ? guardrail.name : undefined);
            if (!result.blocked) expect(result.text).to.equal(whole.kind === 'redact' ? whole.text : text);
          },
        ),
        { numRuns: 200 },
      );
    }
  });

  /** ASCII `text` as the contents of a JSON string, each character as itself or `\uXXXX` (as `escapes` picks). */
  const escapedJson = (text: string, escapes: (index: number) => boolean) =>
    [...text]
      .map((char, index) =>
        char === '"' || char === '\\' || escapes(index)
          ? `\\u${char.charCodeAt(0).toString(16).padStart(4, '0')}`
          : char,
      )
      .join('');

  it('reads tool-call arguments with their JSON escapes undone, however the escapes are cut across events', () => {
    fc.assert(
      fc.property(
        noise,
        fc.integer({ min: 0, max: 9999 }),
        noise,
        fc.func(fc.boolean()),
        fc.array(fc.nat(300), { maxLength: 20 }),
        fc.boolean(),
        (before, code, after, escapes, points, close) => {
          const match = `PROJECT-${String(code).padStart(4, '0')}`;
          const args = `{"q":"${escapedJson(`${before}${match}${after}`, escapes)}"}`;
          const view = textView(args, true);
          const first = /PROJECT-[0-9]{4}/.exec(view.text)!;
          const [start] = rawSpan(view, first.index, first.index + first[0].length);
          const result = stream([codes('block')], cut(args, points), close, true);
          expect(result.blocked).to.equal('no-codes');
          expect(result.text.length).to.be.at.most(start);
        },
      ),
      { numRuns: 500 },
    );
  });

  it('redacts escaped arguments in place as the whole text would be, the arguments staying the JSON they were', () => {
    const quoting = regexGuardrail(
      {
        name: 'quoting',
        use: 'regex',
        on: 'response',
        action: 'redact',
        patterns: ['PROJECT-[0-9]{4}'],
        replacement: 'a "quoted" \\ stand-in',
        ignoreCase: false,
      },
      BOTH,
    );
    for (const guardrail of [codes('redact'), pii('redact'), quoting]) {
      fc.assert(
        fc.property(
          noise,
          fc.constantFrom('PROJECT-1234', 'ada@example.com', 'sk-abcdefghijklmnopqrstuvwx', ''),
          noise,
          fc.func(fc.boolean()),
          fc.array(fc.nat(300), { maxLength: 20 }),
          fc.boolean(),
          (before, planted, after, escapes, points, close) => {
            const args = `{"q":"${escapedJson(`${before}${planted}${after}`, escapes)}"}`;
            const whole = checkText(args, [guardrail], CONTEXT, true);
            const result = stream([guardrail], cut(args, points), close, true);
            expect(result.blocked).to.equal(undefined);
            expect(result.text).to.equal(whole.kind === 'redact' ? whole.text : args);
            const plain = (JSON.parse(result.text) as { q: string }).q;
            if (whole.kind === 'redact' && planted !== '') expect(plain).not.to.contain(planted);
          },
        ),
        { numRuns: 200 },
      );
    }
  });
});
