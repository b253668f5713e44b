import { expect } from 'chai';
import { RedisTeamStore } from '../../../src/stores/teams/redis-team-store.ts';
import { connectReady, redisStoreClients } from '../../helpers/redis-store-clients.ts';
import { behavesAsTeamStore } from './team-store-behaviour.ts';

describe('Redis team store', () => {
  const redis = redisStoreClients();

  behavesAsTeamStore(async () => [new RedisTeamStore(redis.clients[0]!), new RedisTeamStore(redis.clients[1]!)]);

  it('keeps every key under one hash tag', async () => {
    await new RedisTeamStore(redis.clients[0]!).create({ name: 'tagged', rpm: 1 });
    expect((await redis.clients[0]!.keys('*')).sort()).to.deep.equal([
      '{gateway-teams}:names',
      '{gateway-teams}:team:tagged',
    ]);
  });

  it('reads a team stored before teams had ids with its name as its id, through a change and a delete', async () => {
    const stored = { name: 'veteran', rpm: 3, createdAt: '2026-01-05T10:00:00.000Z' };
    await redis.clients[0]!.set('{gateway-teams}:team:veteran', JSON.stringify(stored));
    await redis.clients[0]!.sadd('{gateway-teams}:names', 'veteran');
    const store = new RedisTeamStore(redis.clients[0]!);
    expect(await store.get('veteran')).to.deep.equal({ ...stored, id: 'veteran' });
    expect(await store.list()).to.deep.equal([{ ...stored, id: 'veteran' }]);
    expect(await store.update('veteran', { rpm: 4 })).to.deep.equal({ ...stored, rpm: 4, id: 'veteran' });
    expect(await store.remove('veteran')).to.equal(true);
    expect(await store.deletedId('veteran')).to.equal('veteran');
    expect((await store.create({ name: 'veteran' })).id).not.to.equal('veteran');
    expect((await redis.clients[0]!.keys('*')).sort()).to.deep.equal([
      '{gateway-teams}:deleted:veteran',
      '{gateway-teams}:names',
      '{gateway-teams}:team:veteran',
    ]);
  });

  it('answers 503 while Redis is away', async () => {
    const client = await connectReady(redis.server.url);
    const store = new RedisTeamStore(client);
    try {
      await redis.server.stop();
      await new Promise((resolve) => setTimeout(resolve, 300));
      for (const operation of [
        () => store.create({ name: 'x' }),
        () => store.list(),
        () => store.update('x', { rpm: 1 }),
        () => store.remove('x'),
        () => store.get('x'),
        () => store.deletedId('x'),
      ]) {
        const error = await operation().then(
          () => undefined,
          (failure: { status?: number; detail?: string }) => failure,
        );
        expect(error).to.deep.include({
          status: 503,
          detail: 'The team store (Redis) is unavailable; please retry shortly',
        });
      }
    } finally {
      await redis.server.restart();
      client.disconnect();
    }
  });
});
