import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Logger } from 'pino';
import { createApp } from './app.ts';
import type { GatewayConfig } from './config/gateway-config.ts';
import { loadPlugins } from './plugins/load-plugins.ts';
import { ModelRegistry } from './plugins/model-registry.ts';
import type { RouteServices, UsageAccounting } from './routes/route-services.ts';
import { providerEndpoints } from './upstream/provider-endpoints.ts';
import { UpstreamClient } from './upstream/upstream-client.ts';

export interface Gateway {
  /** `http://host:port` the gateway listens on. */
  readonly url: string;
  readonly server: Server;
  close(): Promise<void>;
}

/** Builds every part from the config, starts listening, and gives back a handle that closes it all. */
export async function startGateway(config: GatewayConfig, env: NodeJS.ProcessEnv, logger: Logger, usage: UsageAccounting): Promise<Gateway> {
  const plugins = await loadPlugins(config.manifestPath);
  const registry = new ModelRegistry(plugins, config.aliases);
  const upstream = new UpstreamClient({ timeoutMs: config.upstreamTimeoutMs });
  const services: RouteServices = {
    registry: () => registry,
    upstream,
    endpoints: providerEndpoints(plugins, config, env, logger),
    usage,
    bodyLimitBytes: config.bodyLimitBytes,
    upstreamBodyLimitBytes: 64 * 1024 * 1024,
  };
  const app = createApp({ services, logger });
  const server: Server = await new Promise((resolve, reject) => {
    const listening = app.listen(config.port, config.host, (error?: Error) => (error ? reject(error) : resolve(listening)));
  });
  server.keepAliveTimeout = 65_000;
  const address = server.address() as AddressInfo;
  const host = address.family === 'IPv6' ? `[${address.address}]` : address.address;
  return {
    url: `http://${host === '0.0.0.0' || host === '[::]' ? '127.0.0.1' : host}:${address.port}`,
    server,
    async close() {
      server.closeIdleConnections();
      await new Promise((resolve) => server.close(resolve));
      await upstream.close();
    },
  };
}
