import { expect } from 'chai';
import fc from 'fast-check';
import { scanObject, type JsonLimits } from '../../../src/data-plane/http/json-body.ts';

const LOOSE: JsonLimits = { maxDepth: 10_000, maxElements: 10_000_000 };
const scan = (text: string, limits = LOOSE) => scanObject(Buffer.from(text, 'utf8'), 0, limits);

/** JSON text of a value with random whitespace around every token, as any client may format it. */
function formatted(value: unknown, space: () => string): string {
  if (Array.isArray(value))
    return `[${space()}${value.map((item) => formatted(item, space)).join(`${space()},${space()}`)}${space()}]`;
  if (value !== null && typeof value === 'object') {
    const members = Object.entries(value).map(
      ([key, item]) => `${JSON.stringify(key)}${space()}:${space()}${formatted(item, space)}`,
    );
    return `{${space()}${members.join(`${space()},${space()}`)}${space()}}`;
  }
  return JSON.stringify(value);
}

function depthOf(value: unknown): number {
  if (value === null || typeof value !== 'object') return 0;
  const children = Array.isArray(value) ? value : Object.values(value);
  return 1 + Math.max(0, ...children.map(depthOf));
}

function elementsOf(value: unknown): number {
  if (value === null || typeof value !== 'object') return 0;
  const children = Array.isArray(value) ? value : Object.values(value);
  return children.length + children.reduce<number>((sum, child) => sum + elementsOf(child), 0);
}

const whitespace = fc.array(fc.constantFrom('', ' ', '\n', '\t', '\r\n', '  '), { minLength: 1, maxLength: 40 });
// Keys with escapes, quotes, backslashes and non-ASCII text, where a scanner is easily misled.
const key = fc.oneof(fc.string(), fc.constantFrom('model', 'a"b', 'c\\', '\\"', 'é', '😀', '\u2028', '2024', '1734'));
const json = fc.letrec((tie) => ({
  value: fc.oneof(
    { depthSize: 'small' },
    fc.constant(null),
    fc.boolean(),
    fc.double({ noNaN: true, noDefaultInfinity: true }),
    fc.string(),
    key,
    tie('array'),
    tie('object'),
  ),
  array: fc.array(tie('value'), { maxLength: 4 }),
  object: fc.dictionary(key, tie('value'), { maxKeys: 5 }),
})).object;

describe('JSON object scan', () => {
  it('finds every top-level member, decoded key and value bytes, whatever the formatting', () => {
    fc.assert(
      fc.property(json, whitespace, (value, spaces) => {
        let turn = 0;
        const text = formatted(value, () => spaces[turn++ % spaces.length]!);
        const bytes = Buffer.from(text, 'utf8');
        const result = scanObject(bytes, 0, LOOSE);
        if (result.kind !== 'object') throw new Error(`not read as an object: ${text}`);
        expect(result.end).to.equal(bytes.length);
        expect(result.members.map((member) => member.key)).to.deep.equal(Object.keys(value));
        for (const member of result.members) {
          const slice = bytes.toString('utf8', member.valueStart, member.valueEnd);
          expect(slice.trim()).to.equal(slice);
          // Against the value as its JSON text reads back (-0 is written as 0).
          expect(JSON.parse(slice)).to.deep.equal(
            JSON.parse(JSON.stringify((value as Record<string, unknown>)[member.key])),
          );
        }
      }),
      { numRuns: 1000 },
    );
  });

  it('measures depth and element count exactly, refusing one past each limit', () => {
    fc.assert(
      fc.property(json, (value) => {
        const text = JSON.stringify(value);
        const depth = depthOf(value);
        const elements = elementsOf(value);
        expect(scan(text, { maxDepth: depth, maxElements: elements }).kind).to.equal('object');
        expect(scan(text, { maxDepth: depth - 1, maxElements: elements }).kind).to.equal('too-deep');
        if (elements > 0)
          expect(scan(text, { maxDepth: depth, maxElements: elements - 1 }).kind).to.equal('too-many-elements');
      }),
      { numRuns: 1000 },
    );
  });

  it('decodes escaped keys, as JSON.parse reads them', () => {
    const result = scan('{"mod\\u0065l":"x","\\"q\\\\":1}');
    expect(result.kind === 'object' && result.members.map((member) => member.key)).to.deep.equal(['model', '"q\\']);
  });

  it('stops at the first level past the depth limit, in one pass over deep input', () => {
    const deep = `{"a":${'['.repeat(100_000)}${']'.repeat(100_000)}}`;
    expect(scan(deep, { maxDepth: 256, maxElements: 1_000_000 }).kind).to.equal('too-deep');
    expect(scan(deep, { maxDepth: 200_000, maxElements: 1_000_000 }).kind).to.equal('object');
  });

  it('calls malformed what is not one object', () => {
    for (const text of [
      '',
      '[]',
      '"x"',
      '{',
      '{"a"}',
      '{"a":}',
      '{"a":1,}',
      '{"a" 1}',
      '{"a":1 "b":2}',
      '{"a":[1}',
      '{"a":"x}',
      '{1:2}',
      '{"a":1]',
    ]) {
      expect(scan(text).kind, text).to.equal('malformed');
    }
  });
});
