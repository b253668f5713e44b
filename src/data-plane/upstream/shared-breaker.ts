import type { Logger } from 'pino';
import type { RedisConnection } from '../../stores/redis/redis-client.ts';
import type { EndpointPool, PooledEndpoint } from './endpoint-pool.ts';

// One hash tag for every key, so that a Redis Cluster keeps them in one slot and MGET works.
const KEY_PREFIX = 'gw:{upstream-rest}:';

/**
 * Shares endpoint rests between gateway instances through Redis: a rest (breaker opened, or a
 * Retry-After) is written as one small key holding its end, expiring with it; every instance reads
 * the keys of its pools once per `intervalMs` and rests those endpoints too. The request path never
 * waits for Redis: writes are fire-and-forget and reads happen in the background, so with Redis away
 * each instance goes on with its own state. Consecutive-failure counts stay per instance.
 */
export class SharedBreakerState {
  private timer: NodeJS.Timeout | undefined;
  private reading = false;
  private members: readonly { readonly pool: EndpointPool; readonly endpoint: PooledEndpoint; readonly key: string }[] =
    [];

  constructor(
    private readonly redis: RedisConnection,
    pools: ReadonlyMap<string, EndpointPool>,
    private readonly logger: Logger,
    private readonly intervalMs = 1000,
  ) {
    this.attach(pools);
  }

  /** Shares the rests of these pools from now on (a config reload builds new ones): theirs are read, and published. */
  attach(pools: ReadonlyMap<string, EndpointPool>): void {
    const members: { pool: EndpointPool; endpoint: PooledEndpoint; key: string }[] = [];
    for (const [vendor, pool] of pools) {
      for (const endpoint of pool.endpoints)
        members.push({ pool, endpoint, key: `${KEY_PREFIX}${vendor}:${endpoint.name}` });
      pool.onRest = (endpoint, restingUntil) => this.publish(`${KEY_PREFIX}${vendor}:${endpoint.name}`, restingUntil);
    }
    this.members = members;
  }

  start(): this {
    this.timer = setInterval(() => void this.read(), this.intervalMs);
    this.timer.unref();
    return this;
  }

  stop(): void {
    clearInterval(this.timer);
  }

  /** Reads every shared rest once (the timer calls it; tests may too). */
  async read(): Promise<void> {
    const members = this.members;
    if (this.reading || members.length === 0) return;
    this.reading = true;
    try {
      const values = await this.redis.mget(...members.map((member) => member.key));
      values.forEach((value, index) => {
        if (value === null) return;
        const member = members[index]!;
        member.pool.restedElsewhere(member.endpoint, Number(value));
      });
    } catch (error) {
      this.logger.debug({ err: error }, 'shared breaker state: Redis not answering; endpoint state stays per instance');
    } finally {
      this.reading = false;
    }
  }

  private publish(key: string, restingUntil: number): void {
    const ttl = Math.ceil(restingUntil - Date.now());
    if (ttl <= 0) return;
    this.redis.set(key, String(restingUntil), 'PX', ttl).catch((error: unknown) => {
      this.logger.debug({ err: error }, 'shared breaker state: could not share a rest; it holds on this instance');
    });
  }
}
