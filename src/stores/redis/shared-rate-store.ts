import type { Cluster } from 'ioredis';
import type { IncrementResponse } from 'express-rate-limit';
import { RedisStore, type RedisReply, type SendCommandClusterDetails } from 'rate-limit-redis';
import { isCluster, type RedisConnection } from './redis-client.ts';

/**
 * An express-rate-limit store in Redis (rate-limit-redis over ioredis), for the control plane's own
 * throttles that every instance must share (failed account sign-ins per address): the data plane's
 * limits are meters of the limit ledger instead. On one node (or Sentinel) commands go through `call`;
 * on a Cluster, ioredis routes EVALSHA by its key, and `SCRIPT LOAD` goes to every master, so the
 * script is known to whichever node owns a counter (rate-limit-redis reloads it on NOSCRIPT).
 */
export function sharedRateStore(redis: RedisConnection, prefix: string): RedisStore {
  if (isCluster(redis))
    return new ReloadingRedisStore({ prefix, sendCommandCluster: (details) => sendToCluster(redis, details) });
  return new ReloadingRedisStore({
    prefix,
    sendCommand: (name, ...rest) => redis.call(name, ...rest) as Promise<RedisReply>,
  });
}

/**
 * rate-limit-redis keeps the promise of its first script load: loaded while Redis was away (at start),
 * it would fail every count for good. After a failed count the scripts are loaded afresh, so counting
 * resumes once Redis is back (a store error meanwhile lets the attempt through).
 */
class ReloadingRedisStore extends RedisStore {
  override async increment(key: string): Promise<IncrementResponse> {
    try {
      return await super.increment(key);
    } catch (error) {
      this.incrementScriptSha = this.loadIncrementScript();
      this.getScriptSha = this.loadGetScript();
      // Awaited by the next count; handled here so that a load nobody awaits yet is no unhandled rejection.
      this.incrementScriptSha.catch(() => {});
      this.getScriptSha.catch(() => {});
      throw error;
    }
  }
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
