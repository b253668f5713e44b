import { Cluster } from 'ioredis';
import { RedisStore, type RedisReply, type SendCommandClusterDetails } from 'rate-limit-redis';
import type { RedisConnection } from '../redis/redis-client.ts';

/**
 * rate-limit-redis over ioredis. On one node (or Sentinel) commands go through `call`. On a Cluster,
 * ioredis routes EVALSHA by its key, and `SCRIPT LOAD` goes to every master: the script must be known
 * to whichever node owns a counter (rate-limit-redis reloads it on NOSCRIPT after a restart).
 */
export function createRedisCounterStore(redis: RedisConnection, prefix: string): RedisStore {
  if (redis instanceof Cluster) {
    return new RedisStore({ prefix, sendCommandCluster: (details) => sendToCluster(redis, details) });
  }
  return new RedisStore({ prefix, sendCommand: (name, ...rest) => redis.call(name, ...rest) as Promise<RedisReply> });
}

async function sendToCluster(cluster: Cluster, { command }: SendCommandClusterDetails): Promise<RedisReply> {
  const [name, ...rest] = command;
  if (name === undefined) throw new Error('empty Redis command');
  if (name.toUpperCase() === 'SCRIPT') {
    const masters = cluster.nodes('master');
    if (masters.length === 0) throw new Error('no Redis Cluster master is connected');
    const replies = await Promise.all(masters.map((node) => node.call(name, ...rest)));
    return replies[0] as RedisReply;
  }
  return (await cluster.call(name, ...rest)) as RedisReply;
}
