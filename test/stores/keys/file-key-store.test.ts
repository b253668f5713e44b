import { expect } from 'chai';
import { mkdtemp, readdir, readFile, rm, stat, utimes, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { hashApiKey } from '../../../src/core/api-keys.ts';
import { FileKeyStore } from '../../../src/stores/keys/file-key-store.ts';
import { ManualClock, withDateNow } from '../../helpers/manual-clock.ts';

describe('file key store', () => {
  let dataDir: string;

  beforeEach(async () => {
    dataDir = await mkdtemp(join(tmpdir(), 'gateway-keys-'));
  });
  afterEach(async () => {
    await rm(dataDir, { recursive: true, force: true });
  });

  it('creates a key shown once, storing only its hash, in a private file written whole', async () => {
    const store = new FileKeyStore(dataDir);
    const { key, record } = await store.create({
      name: 'app',
      rpm: 5,
      models: ['alpha/gen-5.5'],
      expiresAt: '2031-01-01T00:00:00.000Z',
    });
    expect(key).to.match(/^sk-[A-Za-z0-9_-]{43}$/);
    expect(record).to.deep.include({
      name: 'app',
      rpm: 5,
      models: ['alpha/gen-5.5'],
      expiresAt: '2031-01-01T00:00:00.000Z',
      revoked: false,
      hash: hashApiKey(key),
    });
    expect(record.id).to.match(/^key_[0-9a-f]{16}$/);
    const text = await readFile(store.path, 'utf8');
    expect(text).not.to.contain(key);
    expect(text).to.contain(hashApiKey(key));
    expect((await stat(store.path)).mode & 0o777).to.equal(0o600);
    expect(await readdir(dataDir)).to.deep.equal(['keys.json']);
    expect(await store.findByHash(hashApiKey(key))).to.deep.equal(record);
    expect(await store.findByHash(hashApiKey('sk-other-key-000000'))).to.equal(undefined);
  });

  it('keeps the budget fields (tpm, budget, team), the quota and the cache setting, for another instance too', async () => {
    const { record } = await new FileKeyStore(dataDir).create({
      name: 'limited',
      tpm: 900,
      budget: { daily_usd: 1.25, monthly_usd: 20 },
      team: 'research',
      quota: { monthly: 7 },
      cache: false,
    });
    expect(record).to.deep.include({
      tpm: 900,
      budget: { daily_usd: 1.25, monthly_usd: 20 },
      team: 'research',
      quota: { monthly: 7 },
      cache: false,
    });
    expect(await new FileKeyStore(dataDir).findByHash(record.hash)).to.deep.equal(record);
    const kept = (await new FileKeyStore(dataDir).create({ name: 'as set', cache: true, guardrails: [] })).record;
    expect((await new FileKeyStore(dataDir).list()).find((listed) => listed.id === kept.id)).to.deep.include({
      cache: true,
      guardrails: [],
    });
  });

  it('lists and revokes by id; an unknown id is reported', async () => {
    const store = new FileKeyStore(dataDir);
    const first = await store.create({ name: 'first' });
    const second = await store.create({ name: 'second' });
    expect((await store.list()).map((record) => record.name)).to.deep.equal(['first', 'second']);
    expect(await store.revoke(first.record.id)).to.equal(true);
    expect(await store.revoke('key_unknown')).to.equal(false);
    expect((await store.findByHash(first.record.hash))?.revoked).to.equal(true);
    expect((await store.findByHash(second.record.hash))?.revoked).to.equal(false);
  });

  it('shows a running instance the keys another process created and revoked, without a restart', async () => {
    // The server's clock is the test's: it looks at the file at most every 250 ms (its recheck period),
    // so a change must show by then after its last look, however slow the machine.
    const clock = new ManualClock(Date.now());
    const server = withDateNow(clock, () => new FileKeyStore(dataDir));
    const lookUp = (key: string) => withDateNow(clock, () => server.findByHash(hashApiKey(key)));
    const cli = new FileKeyStore(dataDir);
    const { key, record } = await cli.create({ name: 'from the CLI' });
    clock.advance(250);
    expect((await lookUp(key))?.id, 'the new key, one recheck period later').to.equal(record.id);
    await cli.revoke(record.id);
    clock.advance(250);
    expect((await lookUp(key))?.revoked, 'the revoke, one recheck period later').to.equal(true);
  });

  it('updates a key in place: set, replaced, removed with null, kept when absent; seen by another process one recheck later', async () => {
    const clock = new ManualClock(Date.now());
    const server = withDateNow(clock, () => new FileKeyStore(dataDir));
    const cli = new FileKeyStore(dataDir);
    const { key, record } = await cli.create({
      name: 'app',
      rpm: 5,
      quota: { daily: 10, monthly: 100 },
      models: ['alpha/gen-5.5'],
    });
    clock.advance(250);
    expect((await withDateNow(clock, () => server.findByHash(hashApiKey(key))))?.rpm).to.equal(5);
    const updated = await cli.update(record.id, {
      rpm: 1,
      quota: { monthly: 7 },
      models: null,
      tpm: 900,
      cache: false,
    });
    expect(updated).to.deep.equal({
      id: record.id,
      name: 'app',
      hash: record.hash,
      createdAt: record.createdAt,
      revoked: false,
      rpm: 1,
      quota: { monthly: 7 },
      tpm: 900,
      cache: false,
    });
    expect(await new FileKeyStore(dataDir).list()).to.deep.equal([updated]);
    clock.advance(250);
    expect(
      await withDateNow(clock, () => server.findByHash(hashApiKey(key))),
      'the change, one recheck period later',
    ).to.deep.equal(updated);
    expect(await cli.update('key_unknown', { rpm: 2 })).to.equal(undefined);
    await cli.revoke(record.id);
    let refused: unknown;
    await cli.update(record.id, { rpm: 2 }).catch((error: unknown) => (refused = error));
    expect(refused).to.include({ status: 409 });
    expect((await cli.list())[0]).to.include({ rpm: 1, revoked: true });
  });

  it('loses no change when two processes update and revoke at once', async () => {
    const one = new FileKeyStore(dataDir);
    const two = new FileKeyStore(dataDir);
    const { record } = await one.create({ name: 'raced' });
    const other = await two.create({ name: 'other' });
    await Promise.all([
      one.update(record.id, { rpm: 3 }),
      two.update(record.id, { tpm: 4 }),
      one.revoke(other.record.id),
      two.update(other.record.id, { concurrency: 2 }).catch(() => undefined),
    ]);
    const [first, second] = await new FileKeyStore(dataDir).list();
    expect(first).to.include({ rpm: 3, tpm: 4 });
    expect(second).to.include({ revoked: true });
  });

  it('loses no key when two processes write at once', async () => {
    const one = new FileKeyStore(dataDir);
    const two = new FileKeyStore(dataDir);
    await Promise.all(
      Array.from({ length: 10 }, (_, index) => (index % 2 ? one : two).create({ name: `key ${index}` })),
    );
    expect(await new FileKeyStore(dataDir).list()).to.have.length(10);
    expect((await readdir(dataDir)).sort()).to.deep.equal(['keys.json']);
  });

  it('takes over a lock left by a writer that died', async () => {
    const store = new FileKeyStore(dataDir);
    await writeFile(`${store.path}.lock`, '');
    const old = new Date(Date.now() - 60_000);
    await utimes(`${store.path}.lock`, old, old);
    await store.create({ name: 'after a crash' });
    expect(await store.list()).to.have.length(1);
  });

  it('fails lookups with a clear message when the file is not a key file', async () => {
    await writeFile(join(dataDir, 'keys.json'), '{"keys": ');
    expect(() => new FileKeyStore(dataDir)).to.throw(/keys\.json is not valid JSON/);
  });
});
