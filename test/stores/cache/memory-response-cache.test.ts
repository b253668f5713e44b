import { expect } from 'chai';
import { decodeCachedAnswer, encodeCachedAnswer, type CachedAnswer } from '../../../src/core/response-cache.ts';
import { MemoryResponseCache } from '../../../src/stores/cache/memory-response-cache.ts';

const answer = (body: string, storedAt = 1_000): CachedAnswer => ({
  storedAt,
  status: 200,
  contentType: 'application/json',
  stream: false,
  model: 'alpha/gen-5.5',
  usage: { inputTokens: 12, outputTokens: 3, cachedTokens: 2 },
  body: Buffer.from(body),
});

describe('MemoryResponseCache', () => {
  it('keeps an entry whole (head and body bytes) until its TTL ends', () => {
    let now = 10_000;
    const cache = new MemoryResponseCache({ current: 1 << 20 }, {}, () => now);
    cache.set('key:a', 'k1', answer('{"x":"\u00e9"}'), 5_000);
    expect(cache.get('key:a', 'k1')).to.deep.equal(answer('{"x":"\u00e9"}'));
    now += 4_999;
    expect(cache.get('key:a', 'k1')).to.not.equal(undefined);
    now += 1;
    expect(cache.get('key:a', 'k1')).to.equal(undefined);
    expect(cache.size).to.equal(0);
  });

  it('keeps tenants apart: the same key under another tenant is another entry', () => {
    const cache = new MemoryResponseCache({ current: 1 << 20 });
    cache.set('key:a', 'same', answer('a'), 60_000);
    expect(cache.get('team:a', 'same')).to.equal(undefined);
    expect(cache.get('key:b', 'same')).to.equal(undefined);
  });

  it('drops the least recently used entries once its bytes pass the bound, down to 95 % of it, and says how many bytes went', () => {
    const evicted: number[] = [];
    const stored: number[] = [];
    const one = 100 + 'key:a\nk0'.length + 256;
    const cache = new MemoryResponseCache(
      { current: 3 * one },
      {
        evicted: (bytes) => evicted.push(bytes),
        stored: (bytes) => stored.push(bytes),
      },
    );
    for (const key of ['k0', 'k1', 'k2']) cache.set('key:a', key, answer('x'.repeat(100)), 60_000);
    expect(cache.get('key:a', 'k0')).to.not.equal(undefined); // k0, in the older half, is moved to the end
    cache.set('key:a', 'k3', answer('x'.repeat(100)), 60_000);
    // Four entries over a bound of three: down to 2.85 entries' worth, the two least recently used go.
    expect(cache.get('key:a', 'k1')).to.equal(undefined);
    expect(cache.get('key:a', 'k2')).to.equal(undefined);
    for (const key of ['k0', 'k3']) expect(cache.get('key:a', key), key).to.not.equal(undefined);
    expect(cache.size).to.equal(2 * one);
    expect(stored).to.deep.equal([100, 100, 100, 100]);
    expect(evicted).to.deep.equal([200]);
  });

  it('keeps an entry read again and again while newer ones come and go', () => {
    const one = 100 + 'key:a\nhot'.length + 256;
    const cache = new MemoryResponseCache({ current: 20 * one });
    cache.set('key:a', 'hot', answer('x'.repeat(100)), 60_000);
    for (let index = 0; index < 500; index += 1) {
      cache.set('key:a', `k${String(index).padStart(3, '0')}`, answer('x'.repeat(100)), 60_000);
      expect(cache.get('key:a', 'hot'), `after ${index} stores`).to.not.equal(undefined);
    }
  });

  it('stores nothing larger than its whole bound, and replaces an entry written again', () => {
    const cache = new MemoryResponseCache({ current: 400 });
    cache.set('key:a', 'big', answer('x'.repeat(500)), 60_000);
    expect(cache.get('key:a', 'big')).to.equal(undefined);
    cache.set('key:a', 'k', answer('first'), 60_000);
    const size = cache.size;
    cache.set('key:a', 'k', answer('again'), 60_000);
    expect(cache.get('key:a', 'k')!.body.toString()).to.equal('again');
    expect(cache.size).to.equal(size);
  });

  it('empties one tenant or every tenant', async () => {
    const cache = new MemoryResponseCache({ current: 1 << 20 });
    cache.set('key:a', 'k1', answer('1'), 60_000);
    cache.set('key:a', 'k2', answer('2'), 60_000);
    cache.set('team:t', 'k1', answer('3'), 60_000);
    expect(await cache.clear('key:a')).to.equal(2);
    expect(cache.get('team:t', 'k1')).to.not.equal(undefined);
    expect(await cache.clear()).to.equal(1);
    expect(cache.size).to.equal(0);
  });

  it('reads no foreign or damaged value as an entry', () => {
    expect(decodeCachedAnswer(Buffer.from('plain text'))).to.equal(undefined);
    expect(decodeCachedAnswer(Buffer.from([0, 0, 0, 9, 1, 2]))).to.equal(undefined);
    const damaged = encodeCachedAnswer(answer('ok'));
    damaged.write('!', 5);
    expect(decodeCachedAnswer(damaged)).to.equal(undefined);
  });
});
