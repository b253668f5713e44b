import { Counter, Histogram, type Registry } from 'prom-client';

const ROUTE_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300];
const OVERHEAD_BUCKETS = [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1];

/** The answered requests: how many, and how long they took and the gateway's share of it, by route. */
export interface RequestMetrics {
  readonly answered: Counter<'route' | 'model' | 'status'>;
  readonly duration: Histogram<'route'>;
  readonly overhead: Histogram<'route'>;
  readonly firstByte: Histogram<'route'>;
}

export function defineRequestMetrics(registers: Registry[]): RequestMetrics {
  return {
    answered: new Counter({
      name: 'gateway_requests_total',
      help: 'Requests answered, by route, canonical model and status',
      labelNames: ['route', 'model', 'status'],
      registers,
    }),
    duration: new Histogram({
      name: 'gateway_request_duration_seconds',
      help: 'Time from the request to the end of its answer',
      labelNames: ['route'],
      buckets: ROUTE_BUCKETS,
      registers,
    }),
    overhead: new Histogram({
      name: 'gateway_overhead_seconds',
      help: 'Time the gateway itself added: the duration minus the time waiting on the upstream',
      labelNames: ['route'],
      buckets: OVERHEAD_BUCKETS,
      registers,
    }),
    firstByte: new Histogram({
      name: 'gateway_time_to_first_byte_seconds',
      help: 'Time from the request to the answer status and headers',
      labelNames: ['route'],
      buckets: ROUTE_BUCKETS,
      registers,
    }),
  };
}
