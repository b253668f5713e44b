import { Counter, Gauge, type Registry } from 'prom-client';

/** How one upstream attempt ended, as `gateway_upstream_requests_total` counts it. */
export type UpstreamOutcome = 'ok' | 'error_status' | 'transport_error' | 'timeout' | 'aborted';

/** One upstream endpoint's state for `gateway_endpoint_up`. */
export interface EndpointHealth {
  readonly provider: string;
  readonly endpoint: string;
  readonly up: boolean;
}

/** The upstream attempts by outcome (`gateway_endpoint_up` needs no handle: it reads the states when scraped). */
export interface UpstreamAttemptMetrics {
  readonly attempts: Counter<'provider' | 'endpoint' | 'outcome'>;
}

/** Defines the upstream metrics; `endpointStates` is read at each scrape. */
export function defineUpstreamMetrics(
  registers: Registry[],
  endpointStates: () => Iterable<EndpointHealth>,
): UpstreamAttemptMetrics {
  const attempts = new Counter({
    name: 'gateway_upstream_requests_total',
    help: 'Upstream attempts by provider, endpoint and outcome',
    labelNames: ['provider', 'endpoint', 'outcome'],
    registers,
  });
  new Gauge({
    name: 'gateway_endpoint_up',
    help: 'Whether an upstream endpoint takes requests (1) or not (0)',
    labelNames: ['provider', 'endpoint'],
    registers,
    // Across workers: 0 as soon as one worker rests the endpoint (rests are shared through Redis anyway).
    aggregator: 'min',
    collect() {
      this.reset();
      for (const state of endpointStates())
        this.set({ provider: state.provider, endpoint: state.endpoint }, state.up ? 1 : 0);
    },
  });
  return { attempts };
}
