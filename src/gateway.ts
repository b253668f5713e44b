import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Logger } from 'pino';
import { adminRouter } from './admin/admin-routes.ts';
import { createApp } from './app.ts';
import { createAuthenticator } from './auth/authenticate.ts';
import { FileKeyStore } from './auth/file-key-store.ts';
import type { KeyStore } from './auth/key-store.ts';
import { RedisKeyStore } from './auth/redis-key-store.ts';
import type { GatewayConfig } from './config/gateway-config.ts';
import { createRateLimiters } from './limits/rate-limiter.ts';
import { loadPlugins } from './plugins/load-plugins.ts';
import { ModelRegistry } from './plugins/model-registry.ts';
import { nativeChatRoute } from './routes/native-chat-route.ts';
import type { RouteServices } from './routes/route-services.ts';
import { createRedisClient, isReady, waitUntilReady, type RedisConnection } from './store/redis-client.ts';
import { providerEndpoints } from './upstream/provider-endpoints.ts';
import { UpstreamClient } from './upstream/upstream-client.ts';
import { EmbeddedUsageStore } from './usage/embedded-usage-store.ts';
import { RedisUsageStore } from './usage/redis-usage-store.ts';
import { GatewayUsageAccounting } from './usage/usage-accounting.ts';
import { adminUsageRoute, ownUsageRoute } from './usage/usage-routes.ts';
import type { UsageStore } from './usage/usage-store.ts';

export interface Gateway {
  /** `http://host:port` the gateway listens on. */
  readonly url: string;
  readonly server: Server;
  readonly keys: KeyStore;
  readonly usage: UsageStore;
  /** Waits until every usage record taken so far is stored. */
  flushUsage(): Promise<void>;
  /** Stops accepting connections, lets requests in flight finish, stores pending usage, closes stores. */
  close(): Promise<void>;
}

/** The key and usage stores: Redis when configured, else the embedded files under the data directory. */
export async function openStores(config: GatewayConfig, logger: Logger): Promise<{ redis?: RedisConnection; keys: KeyStore; usage: UsageStore }> {
  if (!config.redis) {
    return { keys: new FileKeyStore(config.dataDir), usage: await EmbeddedUsageStore.open(config.dataDir, logger) };
  }
  const redis = createRedisClient(config.redis, logger);
  if (!(await waitUntilReady(redis, 3000))) logger.warn('redis: not reachable at start; serving degraded until it is');
  return { redis, keys: new RedisKeyStore(redis), usage: await RedisUsageStore.open(redis, { dataDir: config.dataDir, logger }) };
}

/** Builds every part from the config, starts listening, and gives back a handle that closes it all. */
export async function startGateway(config: GatewayConfig, env: NodeJS.ProcessEnv, logger: Logger): Promise<Gateway> {
  const plugins = await loadPlugins(config.manifestPath, config.pluginPath);
  const registry = new ModelRegistry(plugins, config.aliases);
  const currentRegistry = () => registry;
  const endpoints = providerEndpoints(plugins, config, env, logger);
  const { redis, keys, usage } = await openStores(config, logger);
  const accounting = new GatewayUsageAccounting(usage, currentRegistry, logger);
  const upstream = new UpstreamClient({ timeoutMs: config.upstreamTimeoutMs });
  const limiters = createRateLimiters({ max: config.rateLimit.max, windowMs: config.rateLimit.windowMs, redis, logger });
  const services: RouteServices = {
    registry: currentRegistry,
    upstream,
    endpoints,
    usage: accounting,
    bodyLimitBytes: config.bodyLimitBytes,
    upstreamBodyLimitBytes: 64 * 1024 * 1024,
  };
  const app = createApp({
    services,
    logger,
    authenticate: createAuthenticator({ store: keys, staticKeys: config.apiKeys, logger }),
    modelRateLimit: limiters.perKey,
    catalogRateLimit: limiters.perAddress,
    nativeChat: nativeChatRoute(services),
    mount: (expressApp, add, guard) => {
      add('get', '/v1/usage', ...guard, ownUsageRoute(usage));
      expressApp.use('/admin', adminRouter({ token: config.adminToken, keys, registry: currentRegistry, bodyLimitBytes: config.bodyLimitBytes, usage: adminUsageRoute(usage) }));
      add('get', '/healthz', (_req, res) => void res.json({ status: 'ok' }));
      add('get', '/readyz', (_req, res) => {
        const redisState = redis ? (isReady(redis) ? 'ready' : 'unavailable') : 'not configured';
        const degraded = limiters.degraded() || !usage.healthy || redisState === 'unavailable';
        res.json({
          status: degraded ? 'degraded' : 'ok',
          redis: redisState,
          rate_limits: redis && !limiters.degraded() ? 'shared' : 'per-process',
          usage: usage.healthy ? 'stored' : 'queued until the store returns',
        });
      });
    },
  });

  const server: Server = await new Promise((resolve, reject) => {
    const listening = app.listen(config.port, config.host, (error?: Error) => (error ? reject(error) : resolve(listening)));
  });
  server.keepAliveTimeout = 65_000;
  const address = server.address() as AddressInfo;
  const host = address.family === 'IPv6' ? `[${address.address}]` : address.address;
  return {
    url: `http://${host === '0.0.0.0' || host === '[::]' ? '127.0.0.1' : host}:${address.port}`,
    server,
    keys,
    usage,
    flushUsage: () => accounting.flush(),
    async close() {
      const closed = new Promise((resolve) => server.close(resolve));
      // Keep-alive connections become idle as their last response ends: close each as it does.
      const sweep = setInterval(() => server.closeIdleConnections(), 100);
      server.closeIdleConnections();
      await closed;
      clearInterval(sweep);
      await accounting.flush();
      await usage.close();
      await keys.close();
      limiters.shutdown();
      await upstream.close();
      redis?.disconnect();
    },
  };
}
