import type { Logger } from 'pino';
import type { Current } from '../../core/current.ts';
import type { GatewayConfig } from '../../config/gateway-config.ts';
import type { RouteId } from '../../plugins/plugin-contract.ts';
import type { ResponseCache } from '../../core/response-cache.ts';
import { InFlight } from '../../data-plane/http/client-connection.ts';
import { modelRoutes, type ModelRouteParts } from '../../data-plane/model-routes.ts';
import type { Next } from '../../data-plane/pipeline/exchange.ts';
import { DEFAULT_RETRY_POLICY } from '../../data-plane/upstream/failover/retry-policy.ts';
import { SharedBreakerState } from '../../data-plane/upstream/shared-breaker.ts';
import { UpstreamClient } from '../../data-plane/upstream/upstream-client.ts';
import type { OpenStores } from '../../stores/open-stores.ts';
import type { LimitLedger } from '../../usage/limit-ledger.ts';
import { GatewayUsageAccounting, type UsageStore } from '../../usage/usage-accounting.ts';
import type { LiveSettings } from '../live-config.ts';
import { openResponseCache, responseCaching } from '../response-cache-wiring.ts';
import type { Configuration } from './configuration.ts';
import type { Limits } from './limits.ts';
import type { Observability } from './observability.ts';

/** What serves the model routes: their pipelines in force, usage accounting, the cache, what runs and what closes. */
export interface ModelServing {
  /** Each model route's pipeline, as the configuration in force built it. */
  readonly routes: Current<ReadonlyMap<RouteId, Next>>;
  readonly accounting: GatewayUsageAccounting;
  readonly responseCache: ResponseCache;
  /** The model requests still running (a shutdown waits for their usage records). */
  readonly inFlight: InFlight;
  /** Closes the upstream pools and stops sharing breaker state. */
  close(): Promise<void>;
}

/**
 * The model routes' parts and their stage lists, rebuilt when a reload applies (the cache and the
 * guardrails are in the lists only while configured); the endpoints' rests are shared through Redis.
 */
export function startModelServing(
  config: GatewayConfig,
  logger: Logger,
  configuration: Configuration,
  stores: OpenStores<UsageStore, LimitLedger>,
  observability: Observability,
  limits: Limits,
): ModelServing {
  const { live, endpoints } = configuration;
  const { redis } = stores;
  const accounting = new GatewayUsageAccounting(stores.usage, live, logger);
  const upstream = new UpstreamClient({ timeoutMs: config.upstreamTimeoutMs, source: observability.source });
  const cacheBound = configuration.inForce((settings) => settings.config.cache?.maxBytes);
  const responseCache = openResponseCache(redis, cacheBound, observability.metrics, logger);
  const sharedBreaker = redis ? new SharedBreakerState(redis, endpoints.pools(), logger).start() : undefined;
  const routesOf = (settings: LiveSettings) =>
    modelRoutes(routeParts(config, settings, limits, accounting, upstream), {
      caching: responseCaching(responseCache, settings.config.cache),
      guardrails: settings.guardrails,
    });
  const routes = configuration.inForce(routesOf);
  configuration.onReload((settings) => {
    // The reload built new endpoint pools: their rests are shared between instances from now on.
    sharedBreaker?.attach(settings.endpoints.pools());
  });
  return {
    routes,
    accounting,
    responseCache,
    inFlight: new InFlight(),
    async close() {
      await upstream.close();
      sharedBreaker?.stop();
    },
  };
}

/** What the model routes' stages are made from: the catalog, endpoints and fallbacks in force, bounds, limits. */
function routeParts(
  config: GatewayConfig,
  settings: LiveSettings,
  limits: Limits,
  usage: GatewayUsageAccounting,
  upstream: UpstreamClient,
): ModelRouteParts {
  return {
    registry: settings.registry,
    endpoints: settings.endpoints,
    fallbacks: settings.fallbacks,
    upstream,
    usage,
    // Every upstream wait is bounded by UPSTREAM_TIMEOUT_MS.
    bounds: {
      timeoutMs: config.upstreamTimeoutMs,
      firstByteTimeoutMs: Math.min(config.firstByteTimeoutMs, config.upstreamTimeoutMs),
      idleTimeoutMs: Math.min(config.idleTimeoutMs, config.upstreamTimeoutMs),
      bodyLimitBytes: 64 * 1024 * 1024,
      maxSseEventBytes: config.maxSseEventBytes,
    },
    bodyLimitBytes: config.bodyLimitBytes,
    clientWriteTimeoutMs: config.clientWriteTimeoutMs,
    authenticate: limits.authenticate,
    admission: { concurrency: limits.concurrency, rateLimit: limits.rates.perKey },
    budgets: limits.budgets,
    nativeChat: { ...DEFAULT_RETRY_POLICY, deadlineMs: config.chatDeadlineMs },
  };
}
