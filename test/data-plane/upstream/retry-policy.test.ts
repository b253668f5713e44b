import { expect } from 'chai';
import {
  backoffMs,
  DEFAULT_RETRY_POLICY,
  isEndpointFault,
  isRetryableStatus,
  restsEndpoint,
  retryAfterMs,
  retryWaitMs,
} from '../../../src/data-plane/upstream/failover/retry-policy.ts';

describe('retry policy', () => {
  it('retries 408, 409, 429 and every 5xx but 501 and 505; nothing else', () => {
    const retried = [
      200, 201, 301, 400, 401, 403, 404, 408, 409, 413, 422, 429, 500, 501, 502, 503, 504, 505, 507, 520, 529, 599,
    ].filter(isRetryableStatus);
    expect(retried).to.deep.equal([408, 409, 429, 500, 502, 503, 504, 507, 520, 529, 599]);
  });

  it('counts 429 and 5xx against the endpoint, not 408 or 409; Retry-After rests it on 429 and 503', () => {
    expect([408, 409, 429, 500, 503, 529].filter(isEndpointFault)).to.deep.equal([429, 500, 503, 529]);
    expect([408, 429, 500, 503, 529].filter(restsEndpoint)).to.deep.equal([429, 503]);
  });

  it('reads retry-after-ms first, then Retry-After as seconds or an HTTP date', () => {
    expect(retryAfterMs({ 'retry-after-ms': '150', 'retry-after': '9' })).to.equal(150);
    expect(retryAfterMs({ 'retry-after-ms': '12.6' })).to.equal(13);
    expect(retryAfterMs({ 'retry-after-ms': 'soon', 'retry-after': '2' })).to.equal(2000);
    expect(retryAfterMs({ 'retry-after-ms': '-5', 'retry-after': '1.5' })).to.equal(1500);
    expect(retryAfterMs({ 'retry-after': new Date(10_000).toUTCString() }, 4_000)).to.equal(6000);
    expect(retryAfterMs({ 'retry-after': new Date(1_000).toUTCString() }, 4_000)).to.equal(0);
    expect(retryAfterMs({})).to.equal(undefined);
  });

  it('refuses what is not a delay: empty, negative, hex, exponent, repeated, words', () => {
    for (const value of ['', ' ', '-1', '0x10', '1e3', 'soon', ['1', '2']]) {
      expect(retryAfterMs({ 'retry-after': value }), JSON.stringify(value)).to.equal(undefined);
      expect(retryAfterMs({ 'retry-after-ms': value }), JSON.stringify(value)).to.equal(undefined);
    }
  });

  it('reads a lone Retry-After value the same way', () => {
    expect(retryAfterMs('3')).to.equal(3000);
    expect(retryAfterMs(' 2 ')).to.equal(2000);
    expect(retryAfterMs(undefined)).to.equal(undefined);
  });

  it("waits the upstream's Retry-After, else the backoff, never less than the minimum, and not past the cap or deadline", () => {
    const policy = { ...DEFAULT_RETRY_POLICY, random: () => 0.5 };
    expect(retryWaitMs(policy, 0, undefined, 0, 10_000)).to.equal(backoffMs(policy, 0));
    expect(retryWaitMs(policy, 0, 2000, 0, 10_000)).to.equal(2000);
    expect(retryWaitMs(policy, 0, 0, 0, 10_000)).to.equal(policy.minDelayMs);
    expect(retryWaitMs(policy, 0, policy.maxRetryAfterMs + 1, 0, Infinity)).to.equal(undefined);
    expect(retryWaitMs(policy, 0, 2000, 8_000, 10_000)).to.equal(undefined);
  });
});
