import { expect } from 'chai';
import {
  AnswerCapture,
  cacheDirective,
  cacheKey,
  forwardedHeaderValues,
  hasInBandError,
  type CacheKeyMaterial,
  type ResponseCaching,
} from '../../../src/data-plane/cache/response-caching.ts';
import type { CachedAnswer, CacheTenant } from '../../../src/core/response-cache.ts';

const material: CacheKeyMaterial = {
  tenant: 'key:k1',
  route: 'chat-completions',
  model: 'alpha/gen-5.5',
  forwarded: Buffer.from('{"model":"gen-5.5","messages":[{"role":"user","content":"hi"}]}'),
  headers: [['anthropic-version', '2023-06-01']],
};

describe('response caching', () => {
  describe('cacheDirective', () => {
    it('reads Cache-Control as a shared cache reads a request', () => {
      expect(cacheDirective({})).to.equal('use');
      expect(cacheDirective({ 'cache-control': 'no-store' })).to.equal('skip');
      expect(cacheDirective({ 'cache-control': 'No-Cache' })).to.equal('refresh');
      expect(cacheDirective({ 'cache-control': 'max-age=0' })).to.equal('refresh');
      expect(cacheDirective({ 'cache-control': 'max-age=60' })).to.equal('use');
      expect(cacheDirective({ 'cache-control': 'no-cache, no-store' })).to.equal('skip');
      expect(cacheDirective({ pragma: 'no-cache' })).to.equal('refresh');
      // Cache-Control wins over Pragma (RFC 9111, 5.4).
      expect(cacheDirective({ pragma: 'no-cache', 'cache-control': 'max-age=60' })).to.equal('use');
    });
  });

  describe('cacheKey', () => {
    it('changes with every part and every byte, and with nothing else', () => {
      const base = cacheKey(material);
      expect(base).to.match(/^[0-9a-f]{64}$/);
      expect(cacheKey({ ...material })).to.equal(base);
      const variants: CacheKeyMaterial[] = [
        { ...material, tenant: 'team:k1' },
        { ...material, tenant: 'key:k2' },
        { ...material, route: 'responses' },
        { ...material, model: 'alpha/gen-6-astra' },
        { ...material, forwarded: Buffer.from(material.forwarded.toString().replace('hi', 'hI')) },
        { ...material, forwarded: Buffer.from(material.forwarded.toString().replace(':[', ': [')) },
        { ...material, headers: [['anthropic-version', '2023-06-02']] },
        { ...material, headers: [['anthropic-version', undefined]] },
        { ...material, headers: [] },
      ];
      const keys = new Set(variants.map(cacheKey));
      expect(keys.size).to.equal(variants.length);
      expect(keys.has(base)).to.equal(false);
    });

    it('cannot be made to collide by moving bytes between parts', () => {
      expect(cacheKey({ ...material, route: 'ab', model: 'c' })).to.not.equal(
        cacheKey({ ...material, route: 'a', model: 'bc' }),
      );
      expect(cacheKey({ ...material, headers: [['a', 'b=c']] })).to.not.equal(
        cacheKey({ ...material, headers: [['a=b', 'c']] }),
      );
    });
  });

  it('takes the forwarded headers with the values that reach the upstream, the route default where the client sent none', () => {
    const route = {
      forwardHeaders: ['anthropic-beta', 'anthropic-version'],
      defaultHeaders: { 'anthropic-version': '2023-06-01' },
    } as never;
    expect(forwardedHeaderValues(route, {})).to.deep.equal([
      ['anthropic-beta', undefined],
      ['anthropic-version', '2023-06-01'],
    ]);
    expect(forwardedHeaderValues(route, { 'anthropic-version': '2024-01-01', 'anthropic-beta': 'x' })).to.deep.equal([
      ['anthropic-beta', 'x'],
      ['anthropic-version', '2024-01-01'],
    ]);
  });

  it('tells a 200 JSON answer that carries an error', () => {
    expect(hasInBandError({ id: 'x', choices: [] })).to.equal(false);
    expect(hasInBandError({ object: 'response', status: 'completed', error: null })).to.equal(false);
    expect(hasInBandError({ error: { message: 'overloaded' } })).to.equal(true);
    expect(hasInBandError({ object: 'response', status: 'incomplete', error: null })).to.equal(true);
    expect(hasInBandError({ object: 'response', status: 'queued', error: null })).to.equal(true);
    expect(hasInBandError(undefined)).to.equal(true);
    expect(hasInBandError([1])).to.equal(true);
  });

  describe('AnswerCapture', () => {
    const stored: { tenant: CacheTenant; key: string; answer: CachedAnswer; ttlMs: number }[] = [];
    const caching: ResponseCaching = {
      store: {
        get: () => undefined,
        set: (tenant, key, answer, ttlMs) => stored.push({ tenant, key, answer, ttlMs }),
        delete: () => {},
        clear: async () => 0,
        close: async () => {},
      },
      settings: { ttlMs: 60_000, maxEntryBytes: 10 },
    };
    const ticket = { key: 'k', tenant: 'key:a' as const, settings: { ttlMs: 60_000, maxEntryBytes: 10 }, read: true };
    const fields = {
      contentType: 'text/event-stream',
      stream: true,
      model: 'm',
      usage: { inputTokens: 1, outputTokens: 1, cachedTokens: 0 },
    };
    beforeEach(() => (stored.length = 0));

    it('stores the bytes collected, once', () => {
      const capture = new AnswerCapture(ticket, caching);
      capture.add(Buffer.from('data: '));
      capture.add(Buffer.from('1\n\n'));
      capture.store(fields);
      capture.store(fields);
      expect(stored).to.have.length(1);
      expect(stored[0]!.answer.body.toString()).to.equal('data: 1\n\n');
      expect(stored[0]).to.deep.include({ tenant: 'key:a', key: 'k', ttlMs: 60_000 });
    });

    it('stores nothing past the entry limit, or once spoiled', () => {
      const big = new AnswerCapture(ticket, caching);
      big.add(Buffer.from('0123456789'));
      big.add(Buffer.from('a'));
      big.store(fields);
      const spoiled = new AnswerCapture(ticket, caching);
      spoiled.add(Buffer.from('x'));
      spoiled.spoiled = true;
      spoiled.store(fields);
      expect(stored).to.deep.equal([]);
    });
  });
});
