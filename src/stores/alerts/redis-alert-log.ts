import type { Logger } from 'pino';
import { RedisBreaker } from '../redis/redis-breaker.ts';
import { isReady, type RedisConnection } from '../redis/redis-client.ts';
import {
  ALERT_DELIVERIES_KEPT,
  alertKeyOf,
  newestFiredFirst,
  type AlertDeliveryEntry,
  type AlertFiringEntry,
  type AlertLog,
} from './alert-log.ts';

/** Each claim is its own key (`SET NX` with an expiry), so that any instance's claim is the one. */
export const ALERT_CLAIM_PREFIX = 'gw-alert-claim:';
/** A hash of each alert's last firing (JSON), by alert. */
export const ALERT_LAST_KEY = 'gw-alert-last';
/** The one list of the newest delivery attempts (JSON, newest first). */
export const ALERT_DELIVERIES_KEY = 'gw-alert-deliveries';

const parsed = <T>(text: string, check: (value: T) => boolean): T[] => {
  try {
    const value = JSON.parse(text) as T;
    return typeof value === 'object' && value !== null && check(value) ? [value] : [];
  } catch {
    return [];
  }
};

/**
 * The alerts of every instance in Redis: a claim is `SET key NX PXAT` (the first instance to reach a
 * threshold takes it), each alert's last firing a field of one hash, deliveries one capped list. Writes
 * are sent without waiting; one that fails is logged once until a write goes through again.
 */
export class RedisAlertLog implements AlertLog {
  private readonly breaker: RedisBreaker;
  private warned = false;

  constructor(
    private readonly redis: RedisConnection,
    private readonly logger: Logger,
    private readonly capacity = ALERT_DELIVERIES_KEPT,
  ) {
    this.breaker = RedisBreaker.of(redis);
  }

  async claim(claim: string, expiresAt: number): Promise<boolean> {
    if (this.breaker.open) throw new Error('Redis is unavailable');
    const taken = await this.redis.set(`${ALERT_CLAIM_PREFIX}${claim}`, String(Date.now()), 'PXAT', expiresAt, 'NX');
    return taken === 'OK';
  }

  fired(entry: AlertFiringEntry): void {
    this.send(() => this.redis.hset(ALERT_LAST_KEY, alertKeyOf(entry), JSON.stringify(entry)));
  }

  async lastFirings(): Promise<AlertFiringEntry[]> {
    if (!isReady(this.redis)) throw new Error('Redis is unavailable');
    const stored = Object.values(await this.redis.hgetall(ALERT_LAST_KEY));
    return stored
      .flatMap((text) => parsed<AlertFiringEntry>(text, (entry) => typeof entry.id === 'string'))
      .sort(newestFiredFirst);
  }

  delivered(entry: AlertDeliveryEntry): void {
    const text = JSON.stringify(entry);
    const last = this.capacity - 1;
    this.send(() => this.redis.multi().lpush(ALERT_DELIVERIES_KEY, text).ltrim(ALERT_DELIVERIES_KEY, 0, last).exec());
  }

  async deliveries(limit: number): Promise<AlertDeliveryEntry[]> {
    const count = Math.min(limit, this.capacity);
    if (count < 1) return [];
    if (!isReady(this.redis)) throw new Error('Redis is unavailable');
    const stored = await this.redis.lrange(ALERT_DELIVERIES_KEY, 0, count - 1);
    return stored.flatMap((text) => parsed<AlertDeliveryEntry>(text, (entry) => typeof entry.delivery === 'string'));
  }

  async close(): Promise<void> {}

  private send(write: () => Promise<unknown>): void {
    if (this.breaker.open) return this.dropped('Redis is unavailable');
    let written: Promise<unknown>;
    try {
      written = write();
    } catch (error) {
      written = Promise.reject(error as Error);
    }
    written.then(
      () => {
        if (!this.warned) return;
        this.warned = false;
        this.logger.info('limit alerts: Redis takes their firings and deliveries again');
      },
      // The message only: an ioredis error object may carry the connection options, password included.
      (error: Error) => {
        this.breaker.trip();
        this.dropped(error.message);
      },
    );
  }

  private dropped(reason: string): void {
    if (this.warned) return;
    this.warned = true;
    this.logger.warn(
      { reason },
      'limit alerts: Redis did not take a firing or delivery; they are dropped until it does',
    );
  }
}
