import { expect } from 'chai';
import { createHmac } from 'node:crypto';
import { backoffMs, signWebhook, verifyWebhook } from '../../../src/ops/alerts/webhook-signature.ts';

const SECRET = 'a-webhook-secret-of-thirty-two-chars-0001';
const BODY = '{"id":"alrt_0123456789abcdef","type":"limit.threshold","threshold":80}';

describe('alert webhook signatures and back-off', () => {
  it('signs "<timestamp>.<body>" with HMAC-SHA256 under the secret, as sha256=<hex>', () => {
    const expected = createHmac('sha256', SECRET).update(`1767225600.${BODY}`).digest('hex');
    expect(signWebhook(SECRET, 1_767_225_600, BODY)).to.equal(`sha256=${expected}`);
    expect(signWebhook(SECRET, 1_767_225_601, BODY)).to.not.equal(`sha256=${expected}`);
  });

  it('verifies a fresh signature and refuses another body, secret, timestamp or a stale one', () => {
    const now = 1_767_225_600;
    const signature = signWebhook(SECRET, now, BODY);
    expect(verifyWebhook(SECRET, { timestamp: String(now), signature }, BODY, now + 10)).to.equal(true);
    expect(verifyWebhook(SECRET, { timestamp: String(now), signature }, BODY.replace('80', '50'), now)).to.equal(false);
    expect(verifyWebhook(`${SECRET}x`, { timestamp: String(now), signature }, BODY, now)).to.equal(false);
    expect(verifyWebhook(SECRET, { timestamp: String(now + 1), signature }, BODY, now)).to.equal(false);
    // A replay long after: the signature holds, the timestamp is too old.
    expect(verifyWebhook(SECRET, { timestamp: String(now), signature }, BODY, now + 301)).to.equal(false);
    expect(verifyWebhook(SECRET, { timestamp: undefined, signature }, BODY, now)).to.equal(false);
    expect(verifyWebhook(SECRET, { timestamp: String(now), signature: undefined }, BODY, now)).to.equal(false);
  });

  it('waits the base, then twice as long each retry, never more than the cap', () => {
    const waits = [1, 2, 3, 4, 5, 6, 7].map((attempt) => backoffMs(attempt, 1000, 30_000));
    expect(waits).to.deep.equal([1000, 2000, 4000, 8000, 16_000, 30_000, 30_000]);
  });
});
