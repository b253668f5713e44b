import { Counter, Gauge, type Registry } from 'prom-client';

/** The Responses WebSockets' messages and closes (the open streams and WebSockets are read when scraped). */
export interface StreamMetrics {
  readonly webSocketReceived: Counter<'type'>;
  readonly webSocketSent: Counter;
  readonly webSocketCloses: Counter<'code'>;
}

/** How many streamed answers and WebSockets are open, read at each scrape. */
export interface OpenStreams {
  readonly streams: () => number;
  readonly webSockets: () => number;
}

/** Defines the metrics of what stays open to relay answers: streamed answers and Responses WebSockets. */
export function defineStreamMetrics(registers: Registry[], open: OpenStreams): StreamMetrics {
  defineOpenGauge(registers, 'gateway_open_streams', 'Streamed answers being relayed now', open.streams);
  defineOpenGauge(registers, 'gateway_websocket_connections', 'Responses WebSockets open now', open.webSockets);
  const webSocketReceived = new Counter({
    name: 'gateway_websocket_messages_received_total',
    help: 'Messages clients sent on WebSockets, by type: response.create, response.cancel, invalid (not taken)',
    labelNames: ['type'],
    registers,
  });
  const webSocketSent = new Counter({
    name: 'gateway_websocket_messages_sent_total',
    help: 'Messages sent on WebSockets: the events of responses, errors, acknowledgements',
    registers,
  });
  const webSocketCloses = new Counter({
    name: 'gateway_websocket_closes_total',
    help: 'WebSockets closed, by close code (1006: the connection ended without one)',
    labelNames: ['code'],
    registers,
  });
  // Shown at 0 from the start, so a rate or an alert on them has a series before the first event.
  for (const type of ['response.create', 'response.cancel', 'invalid']) webSocketReceived.labels(type).inc(0);
  return { webSocketReceived, webSocketSent, webSocketCloses };
}

/** A gauge of how many are open now, summed across workers. */
function defineOpenGauge(registers: Registry[], name: string, help: string, open: () => number): void {
  new Gauge({
    name,
    help,
    registers,
    aggregator: 'sum',
    collect() {
      this.set(open());
    },
  });
}
