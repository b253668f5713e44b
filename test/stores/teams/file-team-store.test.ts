import { expect } from 'chai';
import { mkdtemp, readdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { FileTeamStore } from '../../../src/stores/teams/file-team-store.ts';
import { ManualClock, withDateNow } from '../../helpers/manual-clock.ts';
import { behavesAsTeamStore } from './team-store-behaviour.ts';

describe('file team store', () => {
  let dataDir: string;

  beforeEach(async () => {
    dataDir = await mkdtemp(join(tmpdir(), 'gateway-teams-'));
  });
  afterEach(async () => {
    await rm(dataDir, { recursive: true, force: true });
  });

  behavesAsTeamStore(async () => [new FileTeamStore(dataDir), new FileTeamStore(dataDir)]);

  it('keeps teams in <dataDir>/teams.json, private, written whole', async () => {
    const store = new FileTeamStore(dataDir);
    await store.create({ name: 'one', tpm: 5 });
    expect(store.path).to.equal(join(dataDir, 'teams.json'));
    const { id, createdAt } = (await store.get('one'))!;
    expect(JSON.parse(await readFile(store.path, 'utf8'))).to.deep.include({
      teams: [{ id, name: 'one', tpm: 5, createdAt }],
    });
    expect((await stat(store.path)).mode & 0o777).to.equal(0o600);
    expect(await readdir(dataDir)).to.deep.equal(['teams.json']);
  });

  it('shows a running instance what another process changed, without a restart', async () => {
    // The server's clock is the test's: it looks at the file at most every 250 ms (its recheck period),
    // so a change must show by then after its last look, however slow the machine.
    const clock = new ManualClock(Date.now());
    const server = withDateNow(clock, () => new FileTeamStore(dataDir));
    const get = (name: string) => withDateNow(clock, () => server.get(name));
    const cli = new FileTeamStore(dataDir);
    expect(await get('late')).to.equal(undefined);
    const revision = server.revision;
    await cli.create({ name: 'late', rpm: 1 });
    clock.advance(250);
    expect((await get('late'))?.rpm, 'the new team, one recheck period later').to.equal(1);
    expect(server.revision).to.be.above(revision);
    await cli.update('late', { rpm: 2 });
    clock.advance(250);
    expect((await get('late'))?.rpm, 'the change, one recheck period later').to.equal(2);
  });

  it('loses no team when two processes create at once', async () => {
    const one = new FileTeamStore(dataDir);
    const two = new FileTeamStore(dataDir);
    await Promise.all(
      Array.from({ length: 10 }, (_, index) => (index % 2 ? one : two).create({ name: `team-${index}` })),
    );
    expect(await new FileTeamStore(dataDir).list()).to.have.length(10);
    expect(await readdir(dataDir)).to.deep.equal(['teams.json']);
  });

  it('reads a team stored before teams had ids with its name as its id, through a change and a delete', async () => {
    const stored = { name: 'veteran', rpm: 3, createdAt: '2026-01-05T10:00:00.000Z' };
    await writeFile(join(dataDir, 'teams.json'), JSON.stringify({ teams: [stored] }));
    const store = new FileTeamStore(dataDir);
    expect(await store.get('veteran')).to.deep.equal({ ...stored, id: 'veteran' });
    expect(await store.list()).to.deep.equal([{ ...stored, id: 'veteran' }]);
    expect(await store.update('veteran', { rpm: 4 })).to.deep.equal({ ...stored, rpm: 4, id: 'veteran' });
    expect(await store.remove('veteran')).to.equal(true);
    expect(await store.deletedId('veteran')).to.equal('veteran');
    expect((await store.create({ name: 'veteran' })).id).not.to.equal('veteran');
  });

  it('fails with a clear message when the file is not a team file', async () => {
    await writeFile(join(dataDir, 'teams.json'), '{"keys": []}');
    expect(() => new FileTeamStore(dataDir)).to.throw(/teams\.json must hold \{"teams": \[\.\.\.\]\}/);
  });
});
