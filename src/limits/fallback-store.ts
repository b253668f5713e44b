import { MemoryStore, type IncrementResponse, type Options, type Store } from 'express-rate-limit';
import type { Logger } from 'pino';
import type { RedisStore } from 'rate-limit-redis';
import { isReady, type RedisConnection } from '../store/redis-client.ts';
import { createRedisCounterStore } from './redis-counter-store.ts';

export interface FallbackStoreOptions {
  /** Shared counter keys start with this; every gateway process must use the same prefix. */
  readonly prefix: string;
  readonly logger: Logger;
  /** Longest wait for Redis before one decision is made in memory instead (250 ms by default). */
  readonly timeoutMs?: number;
}

/**
 * Counts in Redis, shared by every gateway process. While Redis is unreachable, or a command fails or
 * is slow, it counts in this process's memory instead (requests keep flowing, each process enforcing
 * the limit on its own), logs that once, and shows it in {@link FallbackStore.degraded}. It goes back to
 * Redis by itself on the first decision after Redis returns.
 */
export class FallbackStore implements Store {
  readonly prefix: string;
  readonly localKeys = false;
  private readonly shared: RedisStore;
  private readonly memory = new MemoryStore();
  private readonly logger: Logger;
  private readonly timeoutMs: number;
  private failing = false;
  // Set after a failure: the scripts may be missing (Redis restarted) or never loaded (Redis was down at start).
  private scriptsStale = false;

  constructor(
    private readonly redis: RedisConnection,
    options: FallbackStoreOptions,
  ) {
    this.prefix = options.prefix;
    this.logger = options.logger;
    this.timeoutMs = options.timeoutMs ?? 250;
    this.shared = createRedisCounterStore(redis, options.prefix);
  }

  /** True while decisions are made in process memory rather than in Redis. */
  get degraded(): boolean {
    return this.failing || !isReady(this.redis);
  }

  init(options: Options): void {
    this.memory.init(options);
    this.shared.init(options).catch(() => {
      this.scriptsStale = true;
    });
  }

  async increment(key: string): Promise<IncrementResponse> {
    if (!isReady(this.redis)) {
      this.fallBack(`connection ${this.redis.status}`);
      return this.memory.increment(key);
    }
    try {
      if (this.scriptsStale) this.reloadScripts();
      const result = await withDeadline(this.shared.increment(key), this.timeoutMs);
      this.recover();
      return result;
    } catch (error) {
      this.scriptsStale = true;
      this.fallBack((error as Error).message);
      return this.memory.increment(key);
    }
  }

  async decrement(key: string): Promise<void> {
    if (this.degraded) return this.memory.decrement(key);
    await withDeadline(this.shared.decrement(key), this.timeoutMs).catch(() => {});
  }

  async resetKey(key: string): Promise<void> {
    await this.memory.resetKey(key);
    await withDeadline(this.shared.resetKey(key), this.timeoutMs).catch(() => {});
  }

  shutdown(): void {
    this.memory.shutdown();
  }

  private fallBack(reason: string): void {
    if (this.failing) return;
    this.failing = true;
    this.logger.warn({ prefix: this.prefix, reason }, 'rate limits: Redis unavailable, counting in process memory until it returns');
  }

  private recover(): void {
    if (!this.failing) return;
    this.failing = false;
    this.logger.info({ prefix: this.prefix }, 'rate limits: Redis back, counting in Redis again');
  }

  private reloadScripts(): void {
    this.scriptsStale = false;
    // Handled here so that a script nobody awaits cannot become an unhandled rejection.
    this.shared.incrementScriptSha = this.shared.loadIncrementScript();
    this.shared.incrementScriptSha.catch(() => {});
    this.shared.getScriptSha = this.shared.loadGetScript();
    this.shared.getScriptSha.catch(() => {});
  }
}

function withDeadline<T>(promise: Promise<T>, timeoutMs: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<never>((_resolve, reject) => {
    timer = setTimeout(() => reject(new Error(`Redis did not answer within ${timeoutMs} ms`)), timeoutMs);
  });
  promise.catch(() => {});
  return Promise.race([promise, deadline]).finally(() => clearTimeout(timer));
}
