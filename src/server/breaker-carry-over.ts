import type { ProviderEndpoints, PooledEndpoint } from '../data-plane/upstream/endpoint-pool.ts';

/** An endpoint's identity across a reload: its provider, full base URL, key and where the key goes. */
const identityOf = (provider: string, member: PooledEndpoint): string =>
  `${provider}\u0000${member.endpoint.origin}${member.endpoint.basePath}\u0000${member.endpoint.apiKey ?? ''}\u0000${JSON.stringify(member.endpoint.auth ?? null)}`;

/**
 * Gives the endpoints of newly built pools the breaker state of the endpoints they replace, where the
 * identity (provider, base URL, key, the key's place) is unchanged: a reload does not end a rest or forget a failure
 * count. A name or weight may change. Several endpoints of one identity are matched in order. A
 * half-open trial in flight is not carried: it reports to the pool it started on, and the new pool
 * lets its own trial through once the rest is over. Returns `next`.
 */
export function carryBreakerState(previous: ProviderEndpoints | undefined, next: ProviderEndpoints): ProviderEndpoints {
  if (previous === undefined) return next;
  const before = new Map<string, PooledEndpoint[]>();
  for (const [provider, pool] of previous.pools()) {
    for (const member of pool.endpoints) {
      const identity = identityOf(provider, member);
      const same = before.get(identity);
      if (same) same.push(member);
      else before.set(identity, [member]);
    }
  }
  for (const [provider, pool] of next.pools()) {
    for (const member of pool.endpoints) {
      const old = before.get(identityOf(provider, member))?.shift();
      if (old === undefined) continue;
      member.consecutiveFailures = old.consecutiveFailures;
      member.restingUntil = old.restingUntil;
      member.tripped = old.tripped;
    }
  }
  return next;
}
