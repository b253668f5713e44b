import { expect } from 'chai';
import { mkdtemp, readdir, readFile, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { FileGroupStore } from '../../../src/stores/groups/file-group-store.ts';
import { ManualClock, withDateNow } from '../../helpers/manual-clock.ts';
import { behavesAsGroupStore } from './group-store-behaviour.ts';

describe('file group store', () => {
  let dataDir: string;

  beforeEach(async () => {
    dataDir = await mkdtemp(join(tmpdir(), 'gateway-groups-'));
  });
  afterEach(async () => {
    await rm(dataDir, { recursive: true, force: true });
  });

  behavesAsGroupStore(async () => [new FileGroupStore(dataDir), new FileGroupStore(dataDir)]);

  it('keeps groups in <dataDir>/groups.json, private', async () => {
    const store = new FileGroupStore(dataDir);
    const created = await store.create({ name: 'one', tpm: 5 });
    expect(store.path).to.equal(join(dataDir, 'groups.json'));
    expect(JSON.parse(await readFile(store.path, 'utf8'))).to.deep.equal({ groups: [created] });
    expect((await stat(store.path)).mode & 0o777).to.equal(0o600);
    expect(await readdir(dataDir)).to.deep.equal(['groups.json']);
  });

  it('shows a running instance what another process changed, one recheck period later', async () => {
    const clock = new ManualClock(Date.now());
    const server = withDateNow(clock, () => new FileGroupStore(dataDir));
    const get = (name: string) => withDateNow(clock, () => server.get(name));
    const cli = new FileGroupStore(dataDir);
    expect(await get('late')).to.equal(undefined);
    const revision = server.revision;
    await cli.create({ name: 'late', tpm: 1 });
    clock.advance(250);
    expect((await get('late'))?.tpm).to.equal(1);
    expect(server.revision).to.be.above(revision);
  });

  it('loses no group when two processes create at once', async () => {
    const one = new FileGroupStore(dataDir);
    const two = new FileGroupStore(dataDir);
    await Promise.all(
      Array.from({ length: 10 }, (_, index) => (index % 2 ? one : two).create({ name: `group-${index}` })),
    );
    expect(await new FileGroupStore(dataDir).list()).to.have.length(10);
  });
});
