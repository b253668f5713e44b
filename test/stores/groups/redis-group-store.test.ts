import { expect } from 'chai';
import { RedisGroupStore } from '../../../src/stores/groups/redis-group-store.ts';
import { redisStoreClients } from '../../helpers/redis-store-clients.ts';
import { behavesAsGroupStore } from './group-store-behaviour.ts';

describe('Redis group store', () => {
  const redis = redisStoreClients();

  behavesAsGroupStore(async () => [new RedisGroupStore(redis.clients[0]!), new RedisGroupStore(redis.clients[1]!)]);

  it('keeps every key under one hash tag', async () => {
    await new RedisGroupStore(redis.clients[0]!).create({ name: 'tagged', tpm: 1 });
    expect((await redis.clients[0]!.keys('*')).sort()).to.deep.equal([
      '{gateway-groups}:group:tagged',
      '{gateway-groups}:names',
    ]);
  });

  it('answers 503, not 500, while Redis is away, saying nothing of the connection', async () => {
    const store = new RedisGroupStore(redis.clients[0]!);
    redis.clients[0]!.disconnect();
    const error = await store.get('any').then(
      () => undefined,
      (failure: unknown) => failure as { status: number; detail: string },
    );
    expect(error).to.deep.include({
      status: 503,
      detail: 'The group store (Redis) is unavailable; please retry shortly',
    });
  });
});
