import { expect } from 'chai';
import fc from 'fast-check';
import { REDACTED, redactCredential, redactCredentialText } from '../../../src/data-plane/upstream/redact-credential.ts';
import { encodedKey, revealsSecret } from '../../helpers/credential-readings.ts';

const redact = (text: string, secret: string) => redactCredential(Buffer.from(text), secret).toString();

describe('redactCredential', () => {
  const secret = 'upstream-secret-key';

  it('replaces every occurrence of the secret and leaves the rest byte for byte', () => {
    const body = Buffer.from(`{"error":{"message":"Incorrect API key: ${secret}. Header was Bearer ${secret}"},"ü":1}`);
    expect(redactCredential(body, secret).toString()).to.equal('{"error":{"message":"Incorrect API key: [REDACTED]. Header was Bearer [REDACTED]"},"ü":1}');
    expect(redactCredentialText(`key ${secret}!`, secret)).to.equal('key [REDACTED]!');
  });

  it('returns the same buffer when the secret is absent, unset or too short to search for', () => {
    const body = Buffer.from('{"ok":true,"k":"abc"}');
    expect(redactCredential(body, secret)).to.equal(body);
    expect(redactCredential(body, undefined)).to.equal(body);
    expect(redactCredential(body, 'abc')).to.equal(body);
  });

  it('returns the same buffer when only escapes that stand for no character of the secret occur', () => {
    const body = Buffer.from('{"t":"line\\nquote\\" caf\\u00e9 \\u4e2d\\u6587 \\\\n 100% a%20b %zz \\u00"}');
    expect(redactCredential(body, secret)).to.equal(body);
    const text = 'a\\nb 50% off';
    expect(redactCredentialText(text, secret)).to.equal(text);
  });

  it('finds the secret with its characters JSON-escaped in either case, percent-encoded, or both mixed', () => {
    const cases = [
      'upstream\\u002dsecret\\u002dkey',
      'upstream\\u002Dsecret-key',
      '\\u0075\\u0070\\u0073\\u0074\\u0072\\u0065\\u0061\\u006d\\u002d\\u0073\\u0065\\u0063\\u0072\\u0065\\u0074\\u002d\\u006b\\u0065\\u0079',
      'upstream%2Dsecret%2dkey',
      '%75pstream-secret-ke%79',
      'up\\u0073tream%2dsecret\\u002Dk%65y',
    ];
    for (const written of cases) {
      expect(redact(`{"error":{"message":"bad key ${written}."}}`, secret), written).to.equal('{"error":{"message":"bad key [REDACTED]."}}');
    }
  });

  it('finds the secret escaped in JSON nested in a JSON string, at any depth', () => {
    expect(redact('{"message":"{\\"detail\\":\\"key upstream\\\\u002dsecret-key\\"}"}', secret)).to.equal('{"message":"{\\"detail\\":\\"key [REDACTED]\\"}"}');
    expect(redact('x upstream\\\\\\\\u002dsecret\\\\u002Dkey x', secret)).to.equal('x [REDACTED] x');
  });

  it('finds a secret with a slash written as \\/ (at any depth), and with non-ASCII characters escaped', () => {
    const slashed = 'key/with/slashes+and=';
    expect(redact('{"k":"key\\/with\\\\\\/slashes%2band\\u003d"}', slashed)).to.equal('{"k":"[REDACTED]"}');
    expect(redact('{"k":"key\\u002fwith/slashes+and="}', slashed)).to.equal('{"k":"[REDACTED]"}');
    const accented = 'clé-secrète-日本';
    expect(redact('{"k":"cl\\u00e9-secr\\u00E8te-\\u65e5\\u672c"}', accented)).to.equal('{"k":"[REDACTED]"}');
    expect(redact('{"k":"cl%C3%A9-secrète-%E6%97%A5%E6%9C%AC"}', accented)).to.equal('{"k":"[REDACTED]"}');
  });

  it('keeps JSON valid when the secret begins inside an escape: the escape goes with it', () => {
    // The key starts with hex digits, which a preceding `\u00` takes as the rest of its escape.
    const hexKey = '41bcdef-0123456789';
    const inEscape = redact(`{"k":"\\u00${hexKey}"}`, hexKey);
    expect(inEscape).to.equal('{"k":"[REDACTED]"}');
    // An unpaired backslash before it escapes its first character.
    const tKey = 'tabcdef-0123456789';
    expect(redact(`{"k":"x\\${tKey}"}`, tKey)).to.equal('{"k":"x[REDACTED]"}');
    expect(redact(`{"k":"x\\\\${tKey}"}`, tKey)).to.equal('{"k":"x\\\\[REDACTED]"}');
    for (const text of [inEscape, redact(`{"k":"x\\${tKey}"}`, tKey)]) expect(() => JSON.parse(text)).not.to.throw();
  });

  it('merges overlapping occurrences into one replacement', () => {
    expect(redact('aaaaaaaaaaa', 'aaaaaaaaaa')).to.equal(REDACTED);
    expect(redact('aaaaaaaaaa\\u0061', 'aaaaaaaaaa')).to.equal(REDACTED);
  });

  it('redacts text the same way and hands back the same string when nothing matched', () => {
    expect(redactCredentialText('Bearer upstream\\u002dsecret%2Dkey', secret)).to.equal('Bearer [REDACTED]');
    const plain = 'nothing to see \\u0041';
    expect(redactCredentialText(plain, secret)).to.equal(plain);
  });

  it('property: any written form of a realistic key, inside any JSON text, is replaced whole and the JSON stays valid', () => {
    fc.assert(
      fc.property(encodedKey, fc.string(), fc.string(), ({ key, encoded }, before, after) => {
        // Spaces keep the key from running into the text around it.
        const head = `{"message":${JSON.stringify(`${before} `).slice(0, -1)}`;
        const tail = `${JSON.stringify(` ${after}`).slice(1)},"n":1}`;
        fc.pre(!revealsSecret(head + tail, key));
        const out = redact(head + encoded + tail, key);
        expect(out).to.equal(head + REDACTED + tail);
        expect(revealsSecret(out, key)).to.equal(false);
        expect(JSON.parse(out)).to.deep.equal({ message: `${before} ${REDACTED} ${after}`, n: 1 });
      }),
      { numRuns: 500 },
    );
  });

  it('property: the key is found among long runs of escapes, those standing for its own characters included', () => {
    const fragment = fc.constantFrom('\\u00e9', '\\u00E8', '\\u0041', '\\u002d', '\\\\u0062', '%20', '%2d', '%4A', '\\n', '\\"', '\\\\', '100% ', 'ab', '-', ' ');
    const run = fc.array(fragment, { maxLength: 80 }).map((parts) => parts.join(''));
    fc.assert(
      fc.property(encodedKey, run, run, ({ key, encoded }, before, after) => {
        const head = `{"t":"${before} `;
        const tail = ` ${after}"}`;
        fc.pre(!revealsSecret(head + tail, key));
        const out = redact(head + encoded + tail, key);
        expect(out).to.equal(head + REDACTED + tail);
        expect(() => JSON.parse(out)).not.to.throw();
      }),
      { numRuns: 300 },
    );
  });

  it('property: text without the key comes back as the same buffer', () => {
    fc.assert(
      fc.property(encodedKey, fc.jsonValue(), ({ key }, value) => {
        const bytes = Buffer.from(JSON.stringify(value));
        fc.pre(!revealsSecret(bytes.toString(), key));
        expect(redactCredential(bytes, key)).to.equal(bytes);
      }),
      { numRuns: 300 },
    );
  });
});
