import { expect } from 'chai';
import { type ApiKeyRecord, hashApiKey } from '../../../src/core/api-keys.ts';
import { createAuthenticator, TrustedCache } from '../../../src/data-plane/pipeline/authenticate.ts';
import type { KeyStore } from '../../../src/stores/keys/key-store.ts';
import { isGatewayError } from '../../../src/core/gateway-errors.ts';
import { eventually } from '../../helpers/eventually.ts';
import { ManualClock, withDateNow } from '../../helpers/manual-clock.ts';

const record = (id: string, revoked = false): ApiKeyRecord => ({
  id,
  name: id,
  hash: hashApiKey(id),
  createdAt: '2026-01-01T00:00:00.000Z',
  revoked,
});

/** A loader over a mutable table that counts its reads. */
function table(entries: Record<string, ApiKeyRecord>) {
  const reads: string[] = [];
  return {
    entries,
    reads,
    load: async (key: string) => {
      reads.push(key);
      return entries[key];
    },
  };
}

describe('trusted cache (presented keys, teams)', () => {
  it('reads the store once, then answers synchronously while the record is trusted', async () => {
    const store = table({ 'sk-a': record('a') });
    const cache = new TrustedCache(store.load, { trustMs: 60_000, maxEntries: 10 });
    const first = cache.get('sk-a');
    expect(first).to.be.instanceOf(Promise);
    expect(await first).to.deep.equal(record('a'));
    for (let index = 0; index < 5; index += 1) expect(cache.get('sk-a')).to.deep.equal(record('a'));
    expect(store.reads).to.deep.equal(['sk-a']);
  });

  it('asks the store once for concurrent first requests of a key', async () => {
    const store = table({ 'sk-a': record('a') });
    const cache = new TrustedCache(store.load, { trustMs: 60_000, maxEntries: 10 });
    await Promise.all([cache.get('sk-a'), cache.get('sk-a'), cache.get('sk-a')]);
    expect(store.reads).to.have.length(1);
  });

  it('reads a busy key again in the background and picks up its new state (a revoke)', async () => {
    const store = table({ 'sk-a': record('a') });
    const cache = new TrustedCache(store.load, { trustMs: 200, maxEntries: 10 });
    await cache.get('sk-a');
    store.entries['sk-a'] = record('a', true);
    await eventually(
      () => {
        const found = cache.get('sk-a');
        return !(found instanceof Promise) && found?.revoked === true;
      },
      'the revoke to be read',
      2000,
    );
    expect(store.reads.length).to.be.at.least(2);
  });

  it('waits for the store once a record is no longer trusted', async () => {
    const store = table({ 'sk-a': record('a') });
    let now = 1000;
    const cache = new TrustedCache(store.load, { trustMs: 30, maxEntries: 10, now: () => now });
    await cache.get('sk-a');
    delete store.entries['sk-a'];
    now += 30;
    const found = cache.get('sk-a');
    expect(found).to.be.instanceOf(Promise);
    expect(await found).to.equal(undefined);
    expect(cache.size).to.equal(0);
  });

  it('answers from memory until half the trust time, then reads once in the background while still answering', async () => {
    const store = table({ busy: record('busy') });
    let now = 1000;
    const cache = new TrustedCache(store.load, { trustMs: 100, maxEntries: 10, now: () => now });
    expect(await cache.get('busy')).to.deep.equal(record('busy'));
    for (let index = 0; index < 50; index += 1) expect(cache.get('busy')).to.deep.equal(record('busy'));
    expect(store.reads).to.have.length(1);
    now += 60;
    store.entries.busy = record('busy', true);
    // Past half the trust time: answered at once from memory, and read again behind it (once).
    expect(cache.get('busy')).to.deep.equal(record('busy'));
    expect(cache.get('busy')).to.deep.equal(record('busy'));
    expect(store.reads).to.have.length(2);
    await eventually(() => {
      const found = cache.get('busy');
      return !(found instanceof Promise) && found?.revoked === true;
    }, 'the background read to land');
    expect(store.reads).to.have.length(2);
  });

  it('remembers a miss when asked to (teams), so a name nobody has costs one read', async () => {
    const store = table({});
    const cache = new TrustedCache(store.load, { trustMs: 60_000, maxEntries: 10, rememberMisses: true });
    expect(await cache.get('nobody')).to.equal(undefined);
    expect(cache.get('nobody')).to.equal(undefined);
    expect(store.reads).to.deep.equal(['nobody']);
  });

  it('with onStale, answers the value read before while the store fails (and trusts it again for a while)', async () => {
    let failing = false;
    let now = 1000;
    let reads = 0;
    const stale: string[] = [];
    const cache = new TrustedCache(
      async (name: string) => {
        reads += 1;
        if (failing) throw new Error('store down');
        return record(name);
      },
      { trustMs: 50, maxEntries: 10, now: () => now, onStale: (name) => stale.push(name) },
    );
    expect(await cache.get('team')).to.deep.equal(record('team'));
    failing = true;
    now += 50;
    expect(await cache.get('team')).to.deep.equal(record('team'));
    expect(stale).to.deep.equal(['team']);
    expect(cache.get('team'), 'trusted again without a read').to.deep.equal(record('team'));
    expect(reads).to.equal(2);
    let caught: unknown;
    await Promise.resolve(cache.get('never-read')).catch((error: unknown) => (caught = error));
    expect((caught as Error).message).to.equal('store down');
  });

  it('reads again at once when the store says its keys changed (a revoke in this process)', async () => {
    const store = table({ 'sk-a': record('a') });
    let revision = 1;
    const cache = new TrustedCache(store.load, { trustMs: 60_000, maxEntries: 10, revision: () => revision });
    await cache.get('sk-a');
    store.entries['sk-a'] = record('a', true);
    revision += 1;
    const found = cache.get('sk-a');
    expect(found).to.be.instanceOf(Promise);
    expect((await found)?.revoked).to.equal(true);
  });

  it('keeps no unknown key and at most maxEntries known ones, forgetting the oldest', async () => {
    const store = table({ 'sk-a': record('a'), 'sk-b': record('b'), 'sk-c': record('c') });
    const cache = new TrustedCache(store.load, { trustMs: 60_000, maxEntries: 2 });
    expect(await cache.get('sk-unknown')).to.equal(undefined);
    expect(cache.size).to.equal(0);
    await cache.get('sk-a');
    await cache.get('sk-b');
    await cache.get('sk-c');
    expect(cache.size).to.equal(2);
    expect(cache.get('sk-c')).not.to.be.instanceOf(Promise);
    expect(cache.get('sk-a')).to.be.instanceOf(Promise);
  });

  it('passes a store failure to the waiting request and tries again on the next', async () => {
    let failing = true;
    const cache = new TrustedCache(
      async () => {
        if (failing) throw new Error('store down');
        return record('a');
      },
      { trustMs: 60_000, maxEntries: 10 },
    );
    let caught: unknown;
    await Promise.resolve(cache.get('sk-a')).catch((error: unknown) => (caught = error));
    expect((caught as Error).message).to.equal('store down');
    failing = false;
    expect(await cache.get('sk-a')).to.deep.equal(record('a'));
  });
});

describe('authenticator check', () => {
  const key = 'sk-check-key-000000000001';
  const countingStore = (records: ApiKeyRecord[]) => {
    let reads = 0;
    const store = {
      findByHash: async (hash: string) => {
        reads += 1;
        return records.find((candidate) => candidate.hash === hash);
      },
    } as Partial<KeyStore> as KeyStore;
    return { store, reads: () => reads };
  };
  const headers = { authorization: `Bearer ${key}` };

  it('is synchronous for a key seen just before, reading the store only on the first request', async () => {
    const { store, reads } = countingStore([{ ...record('key_1'), hash: hashApiKey(key) }]);
    const auth = createAuthenticator({ store, trustMs: 60_000 });
    expect(await auth.check(headers, '/v1/chat/completions')).to.deep.equal({ id: 'key_1', name: 'key_1' });
    const again = auth.check(headers, '/v1/chat/completions');
    expect(again).not.to.be.instanceOf(Promise);
    expect(again).to.deep.equal({ id: 'key_1', name: 'key_1' });
    expect(reads()).to.equal(1);
  });

  it('still refuses a cached key once it expires, without a store read', async () => {
    // Expiring an hour ahead, so the first check (on the real clock) sees it valid however slow the
    // machine; the expiry itself is then reached on a clock the test moves. The authenticator's cache
    // takes Date.now as its clock when built, and a check answered from the cache is synchronous, so
    // both the trust and the key's status are read on the test's clock.
    const clock = new ManualClock(Date.now());
    const expiresAt = clock.time + 3_600_000;
    const { store, reads } = countingStore([
      { ...record('key_2'), hash: hashApiKey(key), expiresAt: new Date(expiresAt).toISOString() },
    ]);
    const auth = withDateNow(clock, () => createAuthenticator({ store, trustMs: 24 * 3_600_000 }));
    expect(await auth.check(headers, '/v1/chat/completions')).to.deep.equal({ id: 'key_2', name: 'key_2' });
    const checkAt = (time: number) => {
      clock.time = time;
      return withDateNow(clock, () => {
        try {
          return auth.check(headers, '/v1/chat/completions');
        } catch (error) {
          return error;
        }
      });
    };
    expect(checkAt(expiresAt - 1), 'a millisecond before it expires').to.deep.equal({ id: 'key_2', name: 'key_2' });
    const caught = checkAt(expiresAt);
    expect(isGatewayError(caught) && caught.status, 'once it expires').to.equal(403);
    expect(reads()).to.equal(1);
  });

  it('throws the 401 synchronously for a malformed header, before any store read', () => {
    const { store, reads } = countingStore([]);
    const auth = createAuthenticator({ store });
    expect(() => auth.check({ authorization: 'Basic x' }, '/v1/chat/completions')).to.throw('Bearer scheme');
    expect(reads()).to.equal(0);
  });
});
