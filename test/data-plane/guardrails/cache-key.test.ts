import { expect } from 'chai';
import { cacheKey, type CacheKeyMaterial } from '../../../src/data-plane/cache/response-caching.ts';

describe('data plane: the response cache key and the response guardrails', () => {
  const material: CacheKeyMaterial = {
    tenant: 'key:key_1',
    route: 'chat-completions',
    model: 'alpha/gen-5.5',
    forwarded: Buffer.from('{"model":"gen-5.5"}'),
    headers: [['x-api-version', '1']],
  };

  it('is as before guardrails existed for a caller without response guardrails', () => {
    expect(cacheKey({ ...material, guardrails: undefined })).to.equal(cacheKey(material));
  });

  it('differs for every set of response guardrails, so that an answer stored under some is never served under others', () => {
    const keys = [
      cacheKey(material),
      cacheKey({ ...material, guardrails: 'a'.repeat(32) }),
      cacheKey({ ...material, guardrails: 'b'.repeat(32) }),
    ];
    expect(new Set(keys).size).to.equal(3);
    // Not confusable with a header of that name and value.
    expect(
      cacheKey({ ...material, headers: [...material.headers, ['guardrails:', `=${'a'.repeat(32)}`]] }),
    ).not.to.equal(keys[1]);
  });
});
