import { answersWithin, isReady, type RedisConnection } from './redis-client.ts';

/** How often an open breaker asks Redis whether it answers again, and how long it waits for the PING. */
const PROBE_EVERY_MS = 1000;
const PROBE_TIMEOUT_MS = 250;

/**
 * One breaker per Redis connection, shared by its users (key lookups, rate limits, the limit ledger):
 * the first command that fails or times out opens it, and while it is open those users skip Redis at
 * once (cached key, counting in memory) instead of each waiting out the command
 * timeout during a stall. A PING every second closes it as soon as Redis answers, traffic or not.
 */
export class RedisBreaker {
  private static readonly breakers = new WeakMap<RedisConnection, RedisBreaker>();
  private opened = false;
  private probe: NodeJS.Timeout | undefined;
  private probing = false;
  private readonly listeners = new Set<() => void>();

  private constructor(private readonly redis: RedisConnection) {
    // A connection closed for good (disconnect) will not answer again: stop probing it.
    redis.once('end', () => {
      clearInterval(this.probe);
      this.probe = undefined;
    });
  }

  /** The breaker of a connection. */
  static of(redis: RedisConnection): RedisBreaker {
    let breaker = RedisBreaker.breakers.get(redis);
    if (!breaker) {
      breaker = new RedisBreaker(redis);
      RedisBreaker.breakers.set(redis, breaker);
    }
    return breaker;
  }

  /**
   * True while Redis is to be skipped: a command failed and no PING has been answered since, or the connection is down.
   */
  get open(): boolean {
    return this.opened || !isReady(this.redis);
  }

  /** A command failed or timed out: open the breaker (probing in the background until Redis answers). */
  trip(): void {
    if (this.opened || this.redis.status === 'end') return;
    this.opened = true;
    this.probe = setInterval(() => void this.probeOnce(), PROBE_EVERY_MS);
    this.probe.unref();
  }

  /** Called once each time the breaker closes again. */
  onClose(listener: () => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  private async probeOnce(): Promise<void> {
    if (this.probing) return;
    this.probing = true;
    try {
      if (await answersWithin(this.redis, PROBE_TIMEOUT_MS)) this.close();
    } finally {
      this.probing = false;
    }
  }

  private close(): void {
    if (!this.opened) return;
    this.opened = false;
    clearInterval(this.probe);
    this.probe = undefined;
    this.listeners.forEach((listener) => listener());
  }
}
