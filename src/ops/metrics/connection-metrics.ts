import { Counter, type Registry } from 'prom-client';

/** Why the connection caps refused a connection or a request, as `gateway_refusals_total` counts it. */
export type RefusalReason = 'max_connections' | 'connections_per_address' | 'pending_requests_per_address';

/** The connections and requests the connection caps refused, by reason. */
export function defineConnectionRefusals(registers: Registry[]): Counter<'reason'> {
  const refusals = new Counter({
    name: 'gateway_refusals_total',
    help: 'Connections and requests refused by the connection caps, by reason',
    labelNames: ['reason'],
    registers,
  });
  // Shown at 0 from the start, so a rate or an alert on them has a series before the first event.
  for (const reason of ['max_connections', 'connections_per_address', 'pending_requests_per_address'])
    refusals.labels(reason).inc(0);
  return refusals;
}
