import { MemoryStore, type IncrementResponse, type Options, type Store } from 'express-rate-limit';
import type { Logger } from 'pino';
import { RedisStore } from 'rate-limit-redis';
import type { RedisConnection } from '../store/redis-client.ts';
import { isReady } from '../store/redis-client.ts';

type Reply = boolean | number | string | (boolean | number | string)[];

/** rate-limit-redis's raw command sender over ioredis, single node or Cluster. */
function commandSender(redis: RedisConnection) {
  if ('nodes' in redis && typeof redis.nodes === 'function' && redis.isCluster) {
    const cluster = redis;
    return {
      sendCommandCluster: async ({ command }: { command: string[] }): Promise<Reply> => {
        const [name, ...args] = command;
        // A script must be known to the node that owns the key: load it on every master.
        if (name!.toUpperCase() === 'SCRIPT') {
          const replies = await Promise.all(cluster.nodes('master').map((node) => node.call(name!, ...args)));
          return replies[0] as Reply;
        }
        return (await cluster.call(name!, ...args)) as Reply;
      },
    };
  }
  return { sendCommand: async (...command: string[]): Promise<Reply> => (await redis.call(command[0]!, ...command.slice(1))) as Reply };
}

/**
 * Counts in Redis, shared by every gateway process; while Redis is unreachable it counts in this
 * process's memory instead (so requests keep flowing, each process enforcing the limit on its own),
 * and goes back to Redis by itself when Redis returns.
 */
export class FallbackStore implements Store {
  private readonly redisStore: RedisStore;
  private readonly memory = new MemoryStore();
  private scriptsStale = false;
  degraded = false;
  readonly localKeys = false;

  constructor(
    private readonly redis: RedisConnection,
    readonly prefix: string,
    private readonly logger: Logger,
  ) {
    this.redisStore = new RedisStore({ prefix, ...commandSender(redis) } as ConstructorParameters<typeof RedisStore>[0]);
  }

  init(options: Options): void {
    this.memory.init(options);
    this.redisStore.init(options).catch(() => {
      this.scriptsStale = true;
    });
  }

  private setDegraded(degraded: boolean, error?: unknown): void {
    if (degraded === this.degraded) return;
    this.degraded = degraded;
    if (degraded) this.logger.warn({ err: { message: (error as Error | undefined)?.message } }, 'rate limits: Redis unreachable, counting in process memory until it returns');
    else this.logger.info('rate limits: Redis is back, counting in Redis again');
  }

  private reloadScripts(): void {
    const swallow = (promise: Promise<string>) => {
      promise.catch(() => {});
      return promise;
    };
    this.redisStore.incrementScriptSha = swallow(this.redisStore.loadIncrementScript());
    this.redisStore.getScriptSha = swallow(this.redisStore.loadGetScript());
    this.scriptsStale = false;
  }

  async increment(key: string): Promise<IncrementResponse> {
    if (isReady(this.redis)) {
      try {
        if (this.scriptsStale) this.reloadScripts();
        const result = await this.redisStore.increment(key);
        this.setDegraded(false);
        return result;
      } catch (error) {
        this.scriptsStale = true;
        this.setDegraded(true, error);
      }
    } else {
      this.scriptsStale = true;
      this.setDegraded(true, new Error(`connection ${this.redis.status}`));
    }
    return this.memory.increment(key);
  }

  async decrement(key: string): Promise<void> {
    if (this.degraded) return this.memory.decrement(key);
    await this.redisStore.decrement(key).catch(() => {});
  }

  async resetKey(key: string): Promise<void> {
    this.memory.resetKey(key);
    await this.redisStore.resetKey(key).catch(() => {});
  }

  shutdown(): void {
    this.memory.shutdown();
  }
}
