import { expect } from 'chai';
import fc from 'fast-check';
import { longestMatch } from '../../src/guardrails/regex-length.ts';

describe('guardrails: the longest match of a regular expression', () => {
  it('adds up sequences, takes the longest alternative and multiplies by quantifier bounds', () => {
    const cases: [string, number][] = [
      ['PROJECT-[0-9]{4}', 12],
      ['abc', 3],
      ['a|bcd|ef', 3],
      ['(?:ab|c){2,3}x?', 7],
      ['\\d{3}-\\d{4}', 8],
      ['[^\\]a-z]{5}', 5],
      ['\\bword\\b', 4],
      ['^start$', 5],
      ['(?<=pre)fix(?!post)', 3],
      ['(?<name>a{2})b', 3],
      ['\\x41\\u0042\\cJ.', 4],
      ['a{2', 3],
      ['x{0}y', 1],
      ['(a)(b)?', 2],
      ['a{1,3}?', 3],
    ];
    for (const [pattern, longest] of cases) expect(longestMatch(pattern), pattern).to.equal(longest);
  });

  it('is unbounded for *, +, open ranges and backreferences', () => {
    for (const pattern of ['a*', 'b+', 'c{2,}', '(a)\\1', '(?<n>a)\\k<n>', 'x(?:y|z+)'])
      expect(longestMatch(pattern), pattern).to.equal(Infinity);
  });

  it('is never shorter than a match found (bounded patterns over random texts)', () => {
    const atoms = fc.constantFrom('a', 'b', '[ab]', '.', '\\d', '(?:a|bb)', 'c');
    const quantifier = fc.constantFrom('', '?', '{2}', '{1,3}', '{0,2}');
    const pattern = fc
      .array(
        fc.tuple(atoms, quantifier).map(([atom, q]) => atom + q),
        { minLength: 1, maxLength: 6 },
      )
      .map((parts) => parts.join(''));
    fc.assert(
      fc.property(
        pattern,
        fc.string({ unit: fc.constantFrom('a', 'b', 'c', '1', ' '), maxLength: 40 }),
        (source, text) => {
          const longest = longestMatch(source);
          for (const match of text.matchAll(new RegExp(source, 'g'))) expect(match[0].length).to.be.at.most(longest);
        },
      ),
      { numRuns: 500 },
    );
  });
});
