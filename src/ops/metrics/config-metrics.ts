import { Counter, Gauge, type Registry } from 'prom-client';

/** The configuration reloads by result (`gateway_config_stale` reads `configStale` when scraped). */
export interface ConfigMetrics {
  readonly reloads: Counter<'result'>;
}

/** Defines the configuration metrics; `configStale` is read at each scrape. */
export function defineConfigMetrics(registers: Registry[], configStale?: () => boolean): ConfigMetrics {
  const reloads = new Counter({
    name: 'gateway_config_reloads_total',
    help: 'Configuration reloads by result',
    labelNames: ['result'],
    registers,
  });
  new Gauge({
    name: 'gateway_config_stale',
    help: 'Whether the last config reload was refused, so an older configuration serves (1) or not (0)',
    registers,
    aggregator: 'max',
    collect() {
      this.set(configStale?.() ? 1 : 0);
    },
  });
  // Shown at 0 from the start, so a rate or an alert on them has a series before the first event.
  for (const result of ['applied', 'rejected']) reloads.labels(result).inc(0);
  return { reloads };
}
