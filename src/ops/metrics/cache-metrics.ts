import { Counter, type Registry } from 'prom-client';

/** The response cache: what it was asked, what it stored and dropped, and what it saved. */
export interface CacheMetrics {
  readonly results: Counter<'result'>;
  readonly storedBytes: Counter;
  readonly evictedBytes: Counter;
  readonly savedUsd: Counter;
}

export function defineCacheMetrics(registers: Registry[]): CacheMetrics {
  const results = new Counter({
    name: 'gateway_cache_requests_total',
    help: 'Requests the response cache was asked about, by result (hit, miss, bypass)',
    labelNames: ['result'],
    registers,
  });
  const storedBytes = new Counter({
    name: 'gateway_cache_stored_bytes_total',
    help: 'Bytes of answers written to the response cache',
    registers,
  });
  const evictedBytes = new Counter({
    name: 'gateway_cache_evicted_bytes_total',
    help: 'Bytes of entries the embedded response cache dropped to stay within cache.maxBytes',
    registers,
  });
  const savedUsd = new Counter({
    name: 'gateway_cache_saved_usd_total',
    help: 'What the answers served from the response cache would have cost upstream, in USD',
    registers,
  });
  // Shown at 0 from the start, so a rate or an alert on them has a series before the first event.
  for (const result of ['hit', 'miss', 'bypass']) results.labels(result).inc(0);
  return { results, storedBytes, evictedBytes, savedUsd };
}
