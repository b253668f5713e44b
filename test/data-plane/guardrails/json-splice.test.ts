import { expect } from 'chai';
import fc from 'fast-check';
import { locateValues, replaceStrings } from '../../../src/data-plane/guardrails/json-splice.ts';
import { setTextAt, valueAt, type JsonPath } from '../../../src/core/formats/format-reading.ts';

/** Every path to a string in a JSON value. */
function stringPaths(value: unknown, path: JsonPath = []): JsonPath[] {
  if (typeof value === 'string') return [path];
  if (Array.isArray(value)) return value.flatMap((item, index) => stringPaths(item, [...path, index]));
  if (value && typeof value === 'object')
    return Object.entries(value).flatMap(([key, item]) => stringPaths(item, [...path, key]));
  return [];
}

describe('data plane: strings rewritten in the bytes of a JSON document, everything else kept', () => {
  it('locates each value the way JSON.parse reads it, the last of a key given twice included', () => {
    const bytes = Buffer.from('{"a": {"b": [1, "x", {"c": "y\\"z"}]}, "a2": "\\u0041", "d": "first", "d": "second"}');
    const spans = locateValues(bytes, [['a', 'b', 1], ['a', 'b', 2, 'c'], ['a2'], ['d'], ['missing'], ['a', 'b', 9]]);
    const text = (span: [number, number] | undefined) => span && bytes.toString('utf8', span[0], span[1]);
    expect(spans.map(text)).to.deep.equal(['"x"', '"y\\"z"', '"\\u0041"', '"second"', undefined, undefined]);
  });

  it('property: rewriting some strings of any JSON value changes exactly those, byte for byte elsewhere', () => {
    fc.assert(
      fc.property(
        fc.jsonValue({ maxDepth: 4 }),
        fc.constantFrom(0, 1, 4),
        fc.array(fc.nat(), { maxLength: 4 }),
        (value, indent, picks) => {
          const paths = stringPaths(value);
          fc.pre(paths.length > 0);
          const chosen = [
            ...new Map(
              picks.map((pick) => paths[pick % paths.length]!).map((path) => [JSON.stringify(path), path]),
            ).values(),
          ];
          const original = Buffer.from(JSON.stringify(value, null, indent));
          const changes = chosen.map((path, index) => ({
            path,
            text: `[redacted ${index}] "é" \\ ${String(valueAt(value, path)).length}`,
          }));
          const rewritten = replaceStrings(original, changes);
          const parsed = JSON.parse(rewritten.toString('utf8')) as unknown;
          for (const change of changes) expect(valueAt(parsed, change.path)).to.equal(change.text);
          // Everything else is as it was: put the old strings back and the bytes are the original's, whitespace
          // included.
          const restored = replaceStrings(
            rewritten,
            chosen.map((path) => ({ path, text: valueAt(value, path) as string })),
          );
          expect(restored.equals(original)).to.equal(true);
          const untouched = paths.filter(
            (path) => !chosen.some((picked) => JSON.stringify(picked) === JSON.stringify(path)),
          );
          for (const path of untouched) expect(valueAt(parsed, path)).to.equal(valueAt(value, path));
        },
      ),
      { numRuns: 300 },
    );
  });

  it('renames a member where a change names its key, every other byte kept (setTextAt: the parsed value alike)', () => {
    const bytes = Buffer.from('{"p": {"ada@example.com" : {"description": "ada@example.com"}, "n":  1}}');
    const slots = [
      { path: ['p', 'ada@example.com', 'description'], text: '[EMAIL]' },
      { path: ['p', 'ada@example.com'], key: true, text: '[EMAIL]' },
    ];
    const rewritten = replaceStrings(bytes, slots).toString();
    expect(rewritten).to.equal('{"p": {"[EMAIL]" : {"description": "[EMAIL]"}, "n":  1}}');
    const parsed = JSON.parse(bytes.toString()) as Record<string, unknown>;
    for (const slot of slots) setTextAt(parsed, slot, slot.text);
    expect(JSON.stringify(parsed)).to.equal('{"p":{"[EMAIL]":{"description":"[EMAIL]"},"n":1}}');
  });

  it('gives back the very bytes when nothing changes', () => {
    const bytes = Buffer.from('{"a":"b"}');
    expect(replaceStrings(bytes, [])).to.equal(bytes);
  });
});
