import type { ServerResponse } from 'node:http';
import { rateLimited } from '../../core/gateway-errors.ts';
import type { CallerKey } from '../../core/exchange.ts';

/**
 * Requests in flight per API key, at most the key's own `concurrency` or else the gateway's default;
 * one more is refused with 429. A request holds its slot from authentication until its response
 * closes: its last byte written (a stream's included) or its client gone. Counted in this process's
 * memory: a count shared through Redis would need leases to survive an instance that dies holding
 * slots, while a count in memory dies with the requests it counts. With several instances (or
 * workers) a key may so hold up to the limit on each.
 */
export class KeyConcurrency {
  private readonly held = new Map<string, number>();

  constructor(private readonly defaultLimit: number) {}

  /** Takes a slot of `caller` until `res` closes; throws the 429 (`Retry-After: 1`) when the key has none left. */
  acquire(caller: CallerKey | undefined, res: ServerResponse): void {
    // The client left while the request was being authenticated: there is nothing to hold a slot for.
    if (res.destroyed) return;
    const id = caller?.id ?? 'anonymous';
    const limit = caller?.concurrency ?? this.defaultLimit;
    const held = this.held.get(id) ?? 0;
    if (held >= limit) {
      throw rateLimited(`Too many concurrent requests with this API key: at most ${limit} at once; retry when one of them has finished`, { 'Retry-After': '1' });
    }
    this.held.set(id, held + 1);
    res.once('close', () => this.release(id));
  }

  /** Requests of the key (by id) holding a slot now. */
  inFlight(id: string): number {
    return this.held.get(id) ?? 0;
  }

  private release(id: string): void {
    const held = (this.held.get(id) ?? 1) - 1;
    if (held > 0) this.held.set(id, held);
    else this.held.delete(id);
  }
}
