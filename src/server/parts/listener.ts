import { createServer, type RequestListener, type Server } from 'node:http';
import type { Socket } from 'node:net';
import type { Logger } from 'pino';
import type { GatewayConfig } from '../../config/gateway-config.ts';
import { trustedPeer } from '../../core/incoming-request.ts';
import { serveMetrics } from '../../control-plane/metrics-route.ts';
import { lingerLimits } from '../../data-plane/http/client-connection.ts';
import type { UpgradeListener } from '../../data-plane/websocket/responses-websockets.ts';
import { answerFiguresRequests } from '../../ops/cluster-metrics.ts';
import type { GatewayMetrics } from '../../ops/metrics.ts';
import { capConnections } from '../connection-cap.ts';

/** The listening sockets: the gateway's, and `METRICS_PORT`'s when `/metrics` has a port of its own. */
export interface Listener {
  readonly server: Server;
  readonly metricsServer?: Server;
}

/**
 * The one node:http server in front of the way in: slow clients' headers and whole requests must arrive
 * in time (408 and the connection closed otherwise, checked every second rather than Node's 30 s), and
 * connections are capped in all and per client address. Requests asking to upgrade go to `upgrade` (the
 * WebSockets). Resolves once it listens.
 */
export async function listen(
  config: GatewayConfig,
  logger: Logger,
  metrics: GatewayMetrics,
  wayIn: RequestListener,
  clusterWorker = false,
  upgrade?: UpgradeListener,
): Promise<Listener> {
  const server = gatewayServer(config, wayIn, upgrade);
  capConnections(
    server,
    {
      max: config.maxConnections,
      maxPerAddress: config.maxConnectionsPerAddress,
      // A trusted proxy carries many clients: its half-sent requests are capped per client it names instead.
      uncapped: trustedPeer(config.trustedProxies),
      lingerBytes: lingerLimits(config.bodyLimitBytes).maxBytes,
      onRefused: (reason) => metrics.refused(reason),
    },
    logger,
  );
  // Before listening: the primary asks a worker for its figures once the worker listens.
  if (clusterWorker) answerFiguresRequests(metrics.registry);
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(config.port, config.host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  // A cluster's primary serves METRICS_PORT itself: its workers do not listen there.
  const metricsServer =
    config.metricsPort === undefined || clusterWorker
      ? undefined
      : await serveMetrics(metrics, config.metricsPort, config.host);
  return { server, metricsServer };
}

/**
 * The node:http server of the way in, with its timeouts; requests asking to upgrade go to `upgrade`, which
 * may hand a socket back to be served as HTTP.
 */
function gatewayServer(config: GatewayConfig, wayIn: RequestListener, upgrade?: UpgradeListener): Server {
  const server = createServer(
    {
      headersTimeout: config.headersTimeoutMs,
      requestTimeout: config.requestTimeoutMs,
      connectionsCheckingInterval: Math.min(1000, config.headersTimeoutMs),
      keepAliveTimeout: 65_000,
    },
    wayIn,
  );
  if (upgrade) {
    // The HTTP layer's own connection listener, before the caps wrap it (they count a connection once).
    const http = server.listeners('connection') as ((socket: Socket) => void)[];
    const serveAsHttp = (socket: Socket) => http.forEach((listener) => listener.call(server, socket));
    server.on('upgrade', (req, socket, head) => upgrade(req, socket, head, serveAsHttp));
  }
  return server;
}
