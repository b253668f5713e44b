import type { Logger } from 'pino';
import { EVENTS, type EventSource, type WebSocketMessage, type WebSocketView } from '../core/diagnostics.ts';
import { ROUTE_TABLE } from '../core/route-table.ts';
import { NO_MODEL, type GatewayMetrics } from './metrics.ts';

const round = (ms: number): number => Math.round(ms * 1000) / 1000;

/**
 * The access log and metrics of the Responses WebSockets: a line when a socket opens and when it closes
 * (its code, how long it was open, what went over it), the open sockets, the messages by type and the
 * closes by code. A response that made a usage record has its line and request metrics from that record,
 * as over HTTP; one refused before (a limit, a bad body) gets them here, as an HTTP refusal gets them
 * from its answer. Refused upgrades are plain HTTP answers, logged as every request. Never a key, a
 * header or a message's content.
 */
export function observeWebSockets(source: EventSource, accessLogger: Logger, metrics: GatewayMetrics): () => void {
  const off = [
    EVENTS.webSocketOpen.subscribe(source, (socket) => {
      metrics.webSocketOpened();
      accessLogger.info(lineOf(socket), 'websocket open');
    }),
    EVENTS.webSocketMessage.subscribe(source, (message) => {
      metrics.webSocketMessage(message.type, message.sent);
      if (!message.recorded) answered(accessLogger, metrics, message);
    }),
    EVENTS.webSocketClose.subscribe(source, ({ socket, code, messages, responses }) => {
      metrics.webSocketClosed(code);
      const durationMs = round(performance.now() - socket.openedAt);
      accessLogger.info({ ...lineOf(socket), code, duration_ms: durationMs, messages, responses }, 'websocket close');
    }),
  ];
  return () => off.forEach((unsubscribe) => unsubscribe());
}

const lineOf = (socket: WebSocketView) => ({
  request_id: socket.requestId,
  route: ROUTE_TABLE[socket.route].metricsLabel,
  key_id: socket.keyId,
});

/** A message answered without a usage record: a response refused before any upstream work is a request as over HTTP. */
function answered(logger: Logger, metrics: GatewayMetrics, message: WebSocketMessage): void {
  const { socket, status } = message;
  const route = ROUTE_TABLE[socket.route].metricsLabel;
  const line = {
    request_id: message.requestId,
    websocket: socket.requestId,
    route,
    type: message.type,
    status,
    error_code: message.errorCode,
    duration_ms: round(message.durationMs),
    key_id: socket.keyId,
  };
  if (message.type !== 'response.create') {
    logger.info(line, 'websocket message');
    return;
  }
  metrics.request(route, NO_MODEL, status, message.durationMs, 0, undefined);
  if (message.limit) metrics.limitRefused(message.limit);
  const quota = message.errorCode === 'GW_ERR_QUOTA_EXCEEDED' || message.errorCode === 'GW_ERR_BUDGET_EXCEEDED';
  if (status === 429) metrics.limited(quota ? 'quota' : 'rate_limit');
  logger.info({ ...line, overhead_ms: line.duration_ms }, 'request');
}
