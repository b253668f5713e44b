import type { Logger } from 'pino';
import { RedisBreaker } from '../redis/redis-breaker.ts';
import { isReady, type RedisConnection } from '../redis/redis-client.ts';
import {
  actionEntryOf,
  GUARDRAIL_ACTIONS_KEPT,
  type GuardrailActionEntry,
  type GuardrailActionLog,
} from './guardrail-action-log.ts';

/** The one Redis list of the newest actions (JSON entries, newest first), shared by every instance. */
export const GUARDRAIL_ACTIONS_KEY = 'gw-guardrail-actions';

export interface RedisGuardrailActionLogOptions {
  readonly logger: Logger;
  /** How many actions the list keeps ({@link GUARDRAIL_ACTIONS_KEPT} by default). */
  readonly capacity?: number;
}

/**
 * The newest guardrail actions in one capped Redis list: each action an `LPUSH` and an `LTRIM` in one
 * MULTI, sent without waiting for the answer. While Redis is away or stalled (the connection's breaker
 * open, or too many writes pending) actions are dropped; that is logged once, and again only after a
 * write has gone through since (which is logged too).
 */
export class RedisGuardrailActionLog implements GuardrailActionLog {
  private readonly breaker: RedisBreaker;
  private readonly capacity: number;
  private pending = 0;
  private warned = false;

  constructor(
    private readonly redis: RedisConnection,
    private readonly options: RedisGuardrailActionLogOptions,
  ) {
    this.breaker = RedisBreaker.of(redis);
    this.capacity = options.capacity ?? GUARDRAIL_ACTIONS_KEPT;
  }

  record(entry: GuardrailActionEntry): void {
    if (this.breaker.open) return this.dropped('Redis is unavailable');
    // More writes waiting than the list keeps (a stall): the next are dropped rather than queued.
    if (this.pending >= this.capacity) return this.dropped('Redis is slow to answer');
    this.pending += 1;
    let written: Promise<[error: Error | null, result: unknown][] | null>;
    try {
      written = this.redis
        .multi()
        .lpush(GUARDRAIL_ACTIONS_KEY, JSON.stringify(actionEntryOf(entry)))
        .ltrim(GUARDRAIL_ACTIONS_KEY, 0, this.capacity - 1)
        .exec();
    } catch (error) {
      written = Promise.reject(error as Error);
    }
    written
      .then(
        (results) => {
          const failure = results === null ? new Error('transaction discarded') : results.find(([error]) => error)?.[0];
          if (failure) this.failed(failure);
          else if (this.warned) {
            this.warned = false;
            this.options.logger.info('guardrail actions: Redis takes them again');
          }
        },
        (error: Error) => this.failed(error),
      )
      .finally(() => (this.pending -= 1));
  }

  async recent(limit: number): Promise<GuardrailActionEntry[]> {
    const count = Math.min(limit, this.capacity);
    if (count < 1) return [];
    if (!isReady(this.redis)) throw new Error('Redis is unavailable');
    const stored = await this.redis.lrange(GUARDRAIL_ACTIONS_KEY, 0, count - 1);
    return stored.flatMap((text) => {
      try {
        const entry = JSON.parse(text) as GuardrailActionEntry;
        return typeof entry === 'object' && entry !== null && typeof entry.guardrail === 'string'
          ? [actionEntryOf(entry)]
          : [];
      } catch {
        return [];
      }
    });
  }

  async close(): Promise<void> {}

  private failed(error: Error): void {
    this.breaker.trip();
    // The message only: an ioredis error object may carry the connection options, password included.
    this.dropped(error.message);
  }

  private dropped(reason: string): void {
    if (this.warned) return;
    this.warned = true;
    this.options.logger.warn(
      { reason },
      'guardrail actions: Redis did not take them; the newest are dropped until it does',
    );
  }
}
