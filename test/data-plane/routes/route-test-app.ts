import type { AddressInfo } from 'node:net';
import { createServer } from 'node:http';
import { createApp } from '../../../src/control-plane/app.ts';
import { createLogger } from '../../../src/core/logger.ts';
import { ModelRegistry } from '../../../src/core/model-registry.ts';
import type { ProviderPlugin, TokenUsage, UsageExtractor } from '../../../src/plugins/plugin-contract.ts';
import { fallbackTable } from '../../../src/data-plane/routes/model-fallbacks.ts';
import { DEFAULT_RETRY_POLICY, type RetryPolicy } from '../../../src/data-plane/upstream/failover/retry-policy.ts';
import type { ExchangeRecord, UsageAccounting } from '../../../src/core/exchange.ts';
import { modelRoutes, type ModelRouteParts } from '../../../src/data-plane/model-routes.ts';
import { EndpointPool, PooledEndpoint, endpointsOf } from '../../../src/data-plane/upstream/endpoint-pool.ts';
import { UpstreamClient, upstreamEndpoint } from '../../../src/data-plane/upstream/upstream-client.ts';

/**
 * A made-up usage format for route tests: `{"usage":{"n":N}}` in a body or an event. The real
 * extractors are tested on their own; these tests check that the routes call them at the right time.
 */
const readN = (value: unknown): TokenUsage | undefined => {
  const n = (value as { usage?: { n?: unknown } } | null)?.usage?.n;
  return typeof n === 'number' ? { inputTokens: n, outputTokens: n, cachedTokens: 0 } : undefined;
};
const testExtractor: UsageExtractor = {
  fromBody: readN,
  fromStreamEvent: (seen, event) => {
    try {
      return readN(JSON.parse(event.data)) ?? seen;
    } catch {
      return seen;
    }
  },
};

export interface RouteTestApp {
  readonly url: string;
  readonly services: ModelRouteParts;
  readonly exchanges: ExchangeRecord[];
  close(): Promise<void>;
}

export async function startRouteTestApp(
  plugins: ProviderPlugin[],
  upstreamUrls: Record<string, string | readonly string[]>,
  options: {
    bodyLimitBytes?: number;
    timeoutMs?: number;
    firstByteTimeoutMs?: number;
    idleTimeoutMs?: number;
    clientWriteTimeoutMs?: number;
    breaker?: { failureThreshold?: number; cooldownMs?: number };
    fallbacks?: Record<string, string[]>;
    retryPolicy?: RetryPolicy;
    maxSseEventBytes?: number;
  } = {},
): Promise<RouteTestApp> {
  const exchanges: ExchangeRecord[] = [];
  const usage: UsageAccounting = {
    extractor: () => testExtractor,
    streamedText: (_format, data) => data,
    charge: (tokens) => ({
      totalTokens: tokens.inputTokens + tokens.outputTokens,
      chargedTokens: tokens.inputTokens + tokens.outputTokens,
      costUsd: 0,
    }),
    record: (exchange) => {
      exchanges.push(exchange);
      return undefined;
    },
  };
  const registry = new ModelRegistry(plugins);
  const upstream = new UpstreamClient({ timeoutMs: options.timeoutMs ?? 5000 });
  const fallbacks = options.fallbacks ? fallbackTable(registry, options.fallbacks) : undefined;
  const timeoutMs = options.timeoutMs ?? 5000;
  const services: ModelRouteParts = {
    registry,
    upstream,
    usage,
    endpoints: endpointsOf(
      new Map(
        Object.entries(upstreamUrls).map(([vendor, urls]) => [
          vendor,
          new EndpointPool(
            (typeof urls === 'string' ? [urls] : urls).map(
              (url, index) => new PooledEndpoint(upstreamEndpoint(vendor, url, 'upstream-secret-key'), `ep${index}`, 1),
            ),
            {
              failureThreshold: options.breaker?.failureThreshold ?? 5,
              cooldownMs: options.breaker?.cooldownMs ?? 30_000,
            },
            Date.now,
            // Endpoints are tried in the order given, so a test knows which one answers first.
            () => 0,
          ),
        ]),
      ),
    ),
    fallbacks,
    bounds: {
      timeoutMs,
      firstByteTimeoutMs: options.firstByteTimeoutMs ?? timeoutMs,
      idleTimeoutMs: options.idleTimeoutMs ?? timeoutMs,
      bodyLimitBytes: 1024 * 1024,
      maxSseEventBytes: options.maxSseEventBytes ?? 16 * 1024 * 1024,
    },
    clientWriteTimeoutMs: options.clientWriteTimeoutMs ?? 60_000,
    bodyLimitBytes: options.bodyLimitBytes ?? 1024 * 1024,
    nativeChat: options.retryPolicy ?? DEFAULT_RETRY_POLICY,
  };
  const routes = modelRoutes(services, {});
  const app = createApp({
    source: {},
    routes: { current: routes },
    registry: () => registry,
    bodyLimitBytes: services.bodyLimitBytes,
    logger: createLogger('silent'),
  });
  const server = createServer(app);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    services,
    exchanges,
    async close() {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
      await upstream.close();
    },
  };
}
