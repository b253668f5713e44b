import { expect } from 'chai';
import fc from 'fast-check';
import { rawSpan, rawStart, textView, viewIndex } from '../../src/guardrails/text-engine.ts';

const IGNORABLES = /\p{Default_Ignorable_Code_Point}/gu;
/** What a reader makes of a text: invisible characters gone, compatibility forms folded. */
const folded = (text: string) => text.replace(IGNORABLES, '').normalize('NFKC');

/**
 * Characters that fold or vanish, mixed with plain ones: full-width forms, ligatures, marks, zero-width and
 * bidirectional controls, surrogate pairs.
 */
const tricky = fc.string({
  unit: fc.constantFrom(
    ...'aeP-1 @.',
    'Ａ',
    'ｅ',
    '１',
    '－',
    '＠',
    'ﬁ',
    '²',
    'ℌ',
    'Ⅻ',
    '\u0301',
    '\u0308',
    '\u200b',
    '\u200d',
    '\u2060',
    '\ufeff',
    '\u00ad',
    '\u202e',
    '\ufe0f',
    'ｶ',
    'ﾞ',
    '가',
    '\u11a8',
    '\u1100',
    '\u1161',
    '𝐀',
    '😀',
    '\u{e0041}',
    'é',
    'ǆ',
  ),
  maxLength: 40,
});

/** `text` written as the contents of a JSON string, each character as itself or escaped (as `chooser` picks). */
function escaped(text: string, chooser: (index: number) => number): string {
  let out = '';
  for (let index = 0; index < text.length; index++) {
    const char = text[index]!;
    const code = char.charCodeAt(0);
    const way = chooser(index) % 3;
    if (char === '"' || char === '\\' || code < 0x20 || way === 1) out += `\\u${code.toString(16).padStart(4, '0')}`;
    else if (way === 2 && char === '/') out += '\\/';
    else out += char;
  }
  return out;
}

describe('guardrails: the view a text is matched on', () => {
  it('is the text NFKC-normalised without default-ignorable characters', () => {
    fc.assert(
      fc.property(tricky, (text) => {
        expect(textView(text).text).to.equal(folded(text));
      }),
      { numRuns: 1000 },
    );
    expect(textView('ＰＲＯ\u200bＪＥＣＴ－１２３４').text).to.equal('PROJECT-1234');
    expect(textView('plain ascii').starts).to.equal(undefined);
  });

  it('maps every stretch of the view back to a stretch of the text that reads as it', () => {
    fc.assert(
      fc.property(tricky, fc.nat(), fc.nat(), (text, a, b) => {
        const view = textView(text);
        fc.pre(view.text.length > 0);
        const from = a % view.text.length;
        const to = from + 1 + (b % (view.text.length - from));
        const [start, end] = rawSpan(view, from, to);
        expect(start).to.be.lessThan(end);
        // The text cut at the stretch reads, piece by piece, as the whole view: the stretch holds the view's part.
        expect(folded(text.slice(0, start)) + folded(text.slice(start, end)) + folded(text.slice(end))).to.equal(
          view.text,
        );
        expect(folded(text.slice(start, end))).to.contain(view.text.slice(from, to));
        expect(viewIndex(view, start)).to.be.at.most(from);
        expect(rawStart(view, viewIndex(view, start))).to.equal(start);
      }),
      { numRuns: 1000 },
    );
  });

  it('reads JSON text with its escapes undone, however the text was escaped', () => {
    fc.assert(
      fc.property(fc.oneof(tricky, fc.string()), fc.func(fc.nat()), (text, chooser) => {
        const json = `{"a":"${escaped(text, chooser)}"}`;
        expect(JSON.parse(json)).to.deep.equal({ a: text });
        const view = textView(json, true);
        expect(view.text).to.equal(folded(`{"a":"${text}"}`));
        if (view.text.length > 0) {
          const [start, end] = rawSpan(view, 0, view.text.length);
          expect([start, end]).to.deep.equal([json.indexOf('{'), json.length]);
        }
      }),
      { numRuns: 1000 },
    );
    expect(textView('{"code":"PROJECT\\u002d1234","q":"\\"x\\\\"}', true).text).to.equal(
      '{"code":"PROJECT-1234","q":""x\\"}',
    );
    // A backslash that starts no escape reads as itself.
    expect(textView('a\\qb\\u12', true).text).to.equal('a\\qb\\u12');
  });

  it('leaves an escape cut off at the end of unfinished JSON text out, to read it whole with what follows', () => {
    for (const cut of ['\\', '\\u', '\\u0', '\\u00', '\\u002']) {
      const view = textView(`{"a":"PROJECT${cut}`, true, false);
      expect(view.text, cut).to.equal('{"a":"PROJECT');
      expect(view.covered).to.equal('{"a":"PROJECT'.length);
      expect(rawStart(view, view.text.length)).to.equal(view.covered);
    }
    expect(textView('{"a":"x\\u002', true, true).text).to.equal('{"a":"x\\u002');
  });
});
