import { rateLimited } from '../../core/gateway-errors.ts';
import type { CallerKey } from '../../core/exchange.ts';
import { concurrencyRefusalHeaders } from '../../core/rate-limit-headers.ts';
import type { RateLimitHeaderStyle } from '../../core/route-table.ts';
import type { ClientResponse } from '../http/client-response.ts';

/**
 * Requests in flight at once, capped only where an operator asked for it: a key's own `concurrency`,
 * else `GATEWAY_KEY_CONCURRENCY` when set, and its team's `concurrency`. Without any, nothing is
 * counted: the providers limit requests and tokens per minute, not streams at once, and a batch job or
 * an agent fleet runs hundreds of streams on one key (clients that stop reading are cut by the client
 * write timeout, and the per-address caps bound what one address holds). One more request than a cap
 * allows is refused with 429, naming the cap, in the route's rate-limit header style and `Retry-After: 1`.
 *
 * A request holds its slots from authentication until its response closes: its last byte written (a
 * stream's included) or its client gone. Counted in this process's memory: a count shared through
 * Redis would need leases to survive an instance that dies holding slots, while a count in memory dies
 * with the requests it counts. With several instances (or workers) a key may hold up to its cap on each.
 */
export class KeyConcurrency {
  private readonly held = new Map<string, number>();

  /** @param defaultLimit `GATEWAY_KEY_CONCURRENCY`: the cap of keys without their own; none when undefined. */
  constructor(private readonly defaultLimit?: number) {}

  /** Takes the slots of `caller` (its key's, its team's) until `res` closes; throws the 429 of a cap with none left. */
  acquire(caller: CallerKey | undefined, res: ClientResponse, style?: RateLimitHeaderStyle): void {
    // The client left while the request was being authenticated: there is nothing to hold a slot for.
    if (res.destroyed) return;
    const keyLimit = caller?.concurrency ?? this.defaultLimit;
    const teamLimit = caller?.team?.concurrency;
    if (keyLimit === undefined && teamLimit === undefined) return;
    const key = keyLimit === undefined ? undefined : `key:${caller?.id ?? 'anonymous'}`;
    const team = teamLimit === undefined ? undefined : `team:${caller!.team!.id}`;
    if (key !== undefined) this.check(key, keyLimit!, style, '');
    if (team !== undefined) this.check(team, teamLimit!, style, ` (team '${caller!.team!.name}')`);
    for (const slot of [key, team]) {
      if (slot === undefined) continue;
      this.held.set(slot, (this.held.get(slot) ?? 0) + 1);
      res.once('close', () => this.release(slot));
    }
  }

  /** Requests of the key (by id) holding a slot now (counted only while the key has a cap). */
  inFlight(id: string): number {
    return this.held.get(`key:${id}`) ?? 0;
  }

  private check(slot: string, limit: number, style: RateLimitHeaderStyle | undefined, whose: string): void {
    if ((this.held.get(slot) ?? 0) < limit) return;
    const scope = whose ? 'team' : 'key';
    throw rateLimited(
      `Concurrency limit exceeded: at most ${limit} requests at once${whose}; retry when one of them has finished`,
      concurrencyRefusalHeaders(style, limit),
      { kind: 'concurrency', scope },
    );
  }

  private release(slot: string): void {
    const held = (this.held.get(slot) ?? 1) - 1;
    if (held > 0) this.held.set(slot, held);
    else this.held.delete(slot);
  }
}
