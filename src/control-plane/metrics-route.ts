import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { RequestHandler } from 'express';
import { sendError } from '../data-plane/answer-error.ts';
import { internalError, isGatewayError, routeNotFound } from '../core/gateway-errors.ts';
import type { MetricsSource } from '../ops/cluster-metrics.ts';

/** `GET /metrics` in Prometheus text format (this process's figures, or the whole cluster's). */
export function metricsRoute(metrics: MetricsSource): RequestHandler {
  return async (_req, res) => {
    const { contentType, body } = await metrics.scrape();
    res.setHeader('content-type', contentType);
    res.send(body);
  };
}

/** `http://host:port` a listening server is reached at (loopback for a wildcard address). */
export function urlOf(server: Server): string {
  const bound = boundUrlOf(server);
  return bound.wildcard ? `http://127.0.0.1:${(server.address() as AddressInfo).port}` : bound.url;
}

/**
 * `http://host:port` as a server is bound (`http://0.0.0.0:8080` for every IPv4 interface), and whether
 * that is a wildcard address: what a start-up line says, so that it shows the host in force.
 */
export function boundUrlOf(server: Server): { readonly url: string; readonly wildcard: boolean } {
  const address = server.address() as AddressInfo;
  const host = address.family === 'IPv6' ? `[${address.address}]` : address.address;
  return { url: `http://${host}:${address.port}`, wildcard: host === '0.0.0.0' || host === '[::]' };
}

/** The metrics alone on their own port (`METRICS_PORT`), so they need not be reachable where clients are. */
export async function serveMetrics(metrics: MetricsSource, port: number, host: string): Promise<Server> {
  const server = createServer((req, res) => {
    const path = (req.url ?? '').split('?')[0];
    if (req.method !== 'GET' || path !== '/metrics') {
      sendError(res, routeNotFound(req.method ?? 'GET', path ?? ''), 'plain');
      return;
    }
    metrics.scrape().then(
      ({ contentType, body }) => res.writeHead(200, { 'content-type': contentType }).end(body),
      (error: unknown) => sendError(res, isGatewayError(error) ? error : internalError(error), 'plain'),
    );
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  return server;
}
