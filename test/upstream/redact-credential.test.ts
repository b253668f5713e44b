import { expect } from 'chai';
import { redactCredential, redactCredentialText } from '../../src/upstream/redact-credential.ts';

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
});
