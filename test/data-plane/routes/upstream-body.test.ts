import { expect } from 'chai';
import {
  assertReadKeysOnce,
  upstreamBody,
  scanObject,
  JSON_BODY_LIMITS,
} from '../../../src/data-plane/http/json-body.ts';
import { isGatewayError } from '../../../src/core/gateway-errors.ts';

function spliced(text: string, withIncludeUsage: boolean): string {
  const bytes = Buffer.from(text, 'utf8');
  const scan = scanObject(bytes, 0, JSON_BODY_LIMITS);
  if (scan.kind !== 'object') throw new Error(scan.kind);
  return upstreamBody(bytes, scan.members, scan.end, { model: 'up-1', withIncludeUsage }).toString('utf8');
}

describe('upstream body', () => {
  it('replaces only the top-level model value, keeping every other byte', () => {
    const text =
      '{ "messages":[{"model":"inner"}] ,\n\t"model" :  "alpha/x" , "seed":9223372036854775807,"logit_bias":{"50256":-100,"1734":5},"s":"\\u00e9\\n" }';
    expect(spliced(text, false)).to.equal(text.replace('"alpha/x"', '"up-1"'));
  });

  const includeUsage: [string, string][] = [
    ['{"model":"m","stream":true}', '{"model":"up-1","stream":true,"stream_options":{"include_usage":true}}'],
    ['{"model":"m","stream":true }', '{"model":"up-1","stream":true,"stream_options":{"include_usage":true} }'],
    [
      '{"model":"m","stream_options":null,"stream":true}',
      '{"model":"up-1","stream_options":{"include_usage":true},"stream":true}',
    ],
    [
      '{"model":"m","stream_options":{ },"stream":true}',
      '{"model":"up-1","stream_options":{"include_usage":true },"stream":true}',
    ],
    [
      '{"model":"m","stream_options":{"include_obfuscation" : false }}',
      '{"model":"up-1","stream_options":{"include_obfuscation" : false,"include_usage":true }}',
    ],
    [
      '{"model":"m","stream_options":{"include_usage":false,"x":[1]}}',
      '{"model":"up-1","stream_options":{"include_usage":true,"x":[1]}}',
    ],
    [
      '{"model":"m","stream_options":{"include_usage": null}}',
      '{"model":"up-1","stream_options":{"include_usage": true}}',
    ],
    [
      '{"model":"m","stream_options":{"x":{"include_usage":false}, "include_usage" :true}}',
      '{"model":"up-1","stream_options":{"x":{"include_usage":false}, "include_usage" :true}}',
    ],
  ];
  for (const [text, expected] of includeUsage) {
    it(`sets include_usage in ${text}, keeping the other stream options and their order`, () => {
      expect(spliced(text, true)).to.equal(expected);
    });
  }

  it('refuses a top level that repeats model, stream or stream_options, naming the key', () => {
    for (const key of ['model', 'stream', 'stream_options']) {
      const text = `{"model":"m","${key === 'model' ? 'mod\\u0065l' : key}":true,"${key}":false}`;
      const scan = scanObject(Buffer.from(text), 0, JSON_BODY_LIMITS);
      if (scan.kind !== 'object') throw new Error(scan.kind);
      try {
        assertReadKeysOnce(scan.members);
        expect.fail(`accepted ${text}`);
      } catch (error) {
        if (!isGatewayError(error)) throw error;
        expect(error).to.include({
          status: 400,
          param: key,
          detail: `The body gives '${key}' more than once; send it once`,
        });
      }
    }
    const nested = scanObject(
      Buffer.from('{"model":"m","messages":[{"model":1},{"model":2}],"x":1,"x":2}'),
      0,
      JSON_BODY_LIMITS,
    );
    if (nested.kind !== 'object') throw new Error(nested.kind);
    expect(() => assertReadKeysOnce(nested.members)).not.to.throw();
  });
});
