import { createServer, type Server, type ServerResponse } from 'node:http';
import type { RequestHandler } from 'express';
import type { Logger } from 'pino';
import { accountRouter } from '../control-plane/account/account-router.ts';
import { MemorySessionStore, RedisSessionStore } from '../stores/session-store.ts';
import { adminRouter } from '../control-plane/admin/admin-routes.ts';
import { createApp } from '../control-plane/app.ts';
import { createAuthenticator } from '../data-plane/auth/authenticate.ts';
import { FailedAuthThrottle } from '../data-plane/auth/failed-auth-throttle.ts';
import type { KeyStore } from '../stores/keys/key-store.ts';
import { openStores } from '../stores/open-stores.ts';
import type { GatewayConfig } from '../config/gateway-config.ts';
import { carryBreakerState } from './breaker-carry-over.ts';
import { LiveConfig, type ReloadResult } from './live-config.ts';
import { clientAddressResolver, trustedPeer } from '../core/client-address.ts';
import { capConnections } from './connection-cap.ts';
import { InFlight } from '../data-plane/http/in-flight.ts';
import { lingerLimits } from '../data-plane/http/linger-close.ts';
import { PendingRequests } from '../data-plane/http/pending-requests.ts';
import { KeyConcurrency } from '../data-plane/limits/key-concurrency.ts';
import { createRateLimiters } from '../data-plane/limits/rate-limiter.ts';
import { loadAllPlugins } from '../plugins/load-plugins.ts';
import { originOf } from '../plugins/plugin-origin.ts';
import { DEFAULT_RETRY_POLICY } from '../data-plane/upstream/failover/retry-policy.ts';
import type { ProviderEndpoints } from '../data-plane/upstream/provider-endpoints.ts';
import { modelRoutes, type ModelRouteParts } from '../data-plane/model-routes.ts';
import { observeGateway } from '../ops/gateway-observers.ts';
import type { EventSource } from '../core/diagnostics.ts';
import type { LiveSettings } from './live-config.ts';
import type { GuardrailPlugin } from '../plugins/plugin-contract.ts';
import { answersWithin } from '../stores/redis/redis-client.ts';
import { providerEndpoints } from '../data-plane/upstream/provider-endpoints.ts';
import { SharedBreakerState } from '../data-plane/upstream/shared-breaker.ts';
import { UpstreamClient } from '../data-plane/upstream/upstream-client.ts';
import { GatewayMetrics } from '../ops/metrics.ts';
import { OPENAPI_DOCUMENT } from '../control-plane/openapi/openapi-document.ts';
import { createAccessLogger } from '../core/logger.ts';
import { answerFiguresRequests, PrimaryScrape } from '../ops/cluster-metrics.ts';
import { metricsRoute, serveMetrics, urlOf } from '../control-plane/metrics-route.ts';
import { GatewayUsageAccounting } from '../usage/usage-accounting.ts';
import type { LimitLedger } from '../usage/limit-ledger.ts';
import { EmbeddedLedger } from '../stores/limits/embedded-ledger.ts';
import { FallbackLedger } from '../stores/limits/fallback-ledger.ts';
import { openResponseCache, responseCaching } from './response-cache-wiring.ts';
import { BudgetGate } from '../data-plane/limits/budget-gate.ts';
import { ownUsageRoute } from '../control-plane/usage-routes.ts';
import type { UsageStore } from '../usage/usage-store.ts';
import { createRequire } from 'node:module';
import { startAuditTrail } from '../ops/audit/audit-trail.ts';
import { reloadApplied } from './access-wiring.ts';
import { aliasTable, providerHealth } from '../control-plane/account/account-health.ts';

export interface Gateway {
  /** `http://host:port` the gateway listens on. */
  readonly url: string;
  readonly server: Server;
  /** `http://host:port` of the separate metrics listener (`METRICS_PORT`); undefined when `/metrics` is on the main port or the cluster primary serves it. */
  readonly metricsUrl?: string;
  readonly metrics: GatewayMetrics;
  /** Whose events (`EVENTS` of `core/diagnostics.ts`) this gateway's are: subscribe with it to observe its requests only. */
  readonly source: EventSource;
  readonly keys: KeyStore;
  readonly usage: UsageStore;
  /** The counters of token and money limits (reservations included). */
  readonly limits: LimitLedger;
  /** Waits until every usage record taken so far is stored. */
  flushUsage(): Promise<void>;
  /**
   * Stops accepting connections and lets requests and streams in flight finish for up to `drainMs`
   * (the config's by default); then ends those still open (each still gets its usage record, estimated
   * where the upstream had not reported it yet), stores every pending record and closes the stores.
   */
  close(drainMs?: number): Promise<void>;
  /** Reads the config file again and applies it when valid (see {@link LiveConfig}); SIGHUP calls it. */
  reloadConfig(trigger?: string): ReloadResult;
  /** The short hash of the config file in force. */
  configVersion(): string;
  /** During {@link close}: ends the requests still open now instead of at the end of the drain time. */
  endInFlight(): void;
}

const OPENAPI_JSON = JSON.stringify(OPENAPI_DOCUMENT);
/**
 * The gateway's version (`service.version` of its traces), from its own package.json (self-referenced,
 * so the compiled build finds it too); `unknown` where the code runs without it (a bare compiled tree).
 */
const VERSION = ((): string => {
  try {
    return (createRequire(import.meta.url)('model-gateway/package.json') as { version: string }).version;
  } catch {
    return 'unknown';
  }
})();

/** A URL as logged: without a user and password it may carry. */
function withoutUserInfo(url: string): string {
  const parsed = new URL(url);
  return `${parsed.origin}${parsed.pathname}`;
}

/** Waits for `work` (its failure ignored), `ms` at most. */
async function withinMs(work: Promise<unknown>, ms: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([work.catch(() => {}), new Promise((resolve) => (timer = setTimeout(resolve, ms)))]);
  clearTimeout(timer);
}

/** How the gateway process runs: alone, or as one worker of a cluster (`GATEWAY_WORKERS`). */
export interface StartOptions {
  /**
   * A cluster worker: `/metrics` on the main port answers with the whole cluster's figures, gathered
   * by the primary (which also serves `METRICS_PORT` itself, so the worker does not listen there).
   */
  readonly clusterWorker?: boolean;
}

/** Builds every part from the config, starts listening, and gives back a handle that closes it all. */
export async function startGateway(config: GatewayConfig, env: NodeJS.ProcessEnv, logger: Logger, options: StartOptions = {}): Promise<Gateway> {
  const { providers: plugins, guardrails: guardrailPlugins } = await loadAllPlugins(config.manifestPath, config.pluginPath);
  const live = new LiveConfig({
    plugins,
    guardrailPlugins,
    env,
    config,
    // A reload keeps the breaker state (rests, failure counts) of the endpoints it does not change.
    buildEndpoints: (settings, previous) => carryBreakerState(previous, providerEndpoints(plugins, settings, env, logger)),
    logger,
    onApplied: (settings, previous) => {
      rebuildRoutes?.(settings);
      logger.level = settings.config.logLevel;
      accessLogger.level = settings.config.logLevel;
      // The reload built new endpoint pools: their rests are shared between instances from now on.
      sharedBreaker?.attach(settings.endpoints.pools());
      // Of the tracing settings only the sampler applies live; the rest are read at start.
      if (tracing?.setSampler(settings.config.tracing.sampler)) logger.info({ sampler: settings.config.tracing.sampler.name, ratio: settings.config.tracing.sampler.ratio }, 'trace sampler changed');
      reloadApplied(source, settings, previous);
    },
    onResult: (result) => metrics.configReload(result),
  });
  let rebuildRoutes: ((settings: LiveSettings) => void) | undefined;
  // Once the catalog is built (every plugin accepted): one line per plugin, where it came from.
  for (const plugin of plugins) {
    const directory = originOf(plugin);
    logger.info({ plugin: plugin.vendor, directory, models: plugin.models.length }, `plugin '${plugin.vendor}' loaded from ${directory}: ${plugin.models.length} model(s)`);
  }
  logGuardrailPlugins(logger, guardrailPlugins);
  // The gateway's events carry this source: its observers see its requests only, not another gateway's in the process.
  const source = {};
  const currentRegistry = () => live.current.registry;
  const endpoints: ProviderEndpoints = {
    get: (vendor) => live.current.endpoints.get(vendor),
    pool: (vendor) => live.current.endpoints.pool(vendor),
    pools: () => live.current.endpoints.pools(),
    envPrefix: (vendor) => live.current.endpoints.envPrefix(vendor),
  };
  const stores = await openStores(config, { unreachableRedis: 'degrade', usage: true, logger });
  const { redis, keys, teams, usage, guardrailActions, tokens, audit } = stores;
  const exportTo = config.auditExport;
  const auditTrail = startAuditTrail({ source, store: audit, logger, export: exportTo === undefined ? undefined : exportTo === 'stdout' ? 'stdout' : { file: exportTo } });
  // Token and money limits: in Redis with an in-process fallback, else in process with day and month counts on disk.
  const ledger: LimitLedger = redis ? new FallbackLedger(redis, { logger }) : await EmbeddedLedger.open(config.dataDir, logger);
  const sharedBreaker = redis ? new SharedBreakerState(redis, endpoints.pools(), logger).start() : undefined;
  const accounting = new GatewayUsageAccounting(usage, currentRegistry, logger);
  const metrics = new GatewayMetrics({
    usageQueueDepth: () => (usage as Partial<{ queueDepth: number }>).queueDepth ?? 0,
    configStale: () => live.lastError !== undefined,
    build: { version: VERSION, revision: env.GATEWAY_REVISION || 'unknown' },
  });
  // gateway_endpoint_up reads the breakers of the endpoint pools in force at each scrape.
  metrics.setEndpointStates(function* () {
    for (const [provider, pool] of endpoints.pools()) {
      const states = pool.state();
      for (const [index, member] of pool.endpoints.entries()) yield { provider, endpoint: member.endpoint.origin, up: states[index]!.status !== 'resting' };
    }
  });
  const responseCache = openResponseCache(redis, () => live.current.config, metrics, logger);
  const accessLogger = createAccessLogger(logger);
  // Off (undefined) without a traces endpoint: then no request makes a span.
  // The OpenTelemetry SDK and its exporters load only when configured (they hold about 13 MB once loaded).
  const tracing = config.tracing.traces
    ? (await import('../ops/tracing/otel-tracing.ts')).startTracing(config.tracing, { exported: (count) => metrics.tracesExported(count), dropped: (reason, count) => metrics.tracesDropped(reason, count) }, VERSION)
    : undefined;
  const otlpMetrics = config.tracing.metrics ? (await import('../ops/tracing/otlp-metrics.ts')).startOtlpGenAiMetrics(config.tracing, metrics.registry, VERSION) : undefined;
  // Where spans and metrics go, never the headers (they may carry a collector's credential).
  if (tracing) logger.info({ traces: withoutUserInfo(config.tracing.traces!.url), protocol: config.tracing.traces!.protocol, sampler: config.tracing.sampler.name, ratio: config.tracing.sampler.ratio }, 'tracing on: OTLP traces');
  if (otlpMetrics) logger.info({ metrics: withoutUserInfo(config.tracing.metrics!.url), protocol: config.tracing.metrics!.protocol }, 'GenAI metrics over OTLP');
  const unobserve = observeGateway(source, { logger, accessLogger, metrics, guardrailActions });
  const untrace = tracing ? (await import('../ops/tracing/trace-subscriber.ts')).traceExchanges(source, tracing.requests) : undefined;
  const upstream = new UpstreamClient({ timeoutMs: config.upstreamTimeoutMs, source });
  // Request rates are meters of the same ledger; the limit and window in force are read per request.
  const limiters = createRateLimiters({ ledger, settings: () => live.current.config.rateLimit });
  const modelRateLimit = limiters.perKey;
  const catalogRateLimit = limiters.perAddress;
  const inFlight = new InFlight();
  // Separate budgets: wrong API keys from an address never lock the admin out, nor the other way round.
  const keyThrottle = new FailedAuthThrottle(config.authFailuresPerMinute, { subject: 'API key attempts' });
  const adminThrottle = new FailedAuthThrottle(config.authFailuresPerMinute, { subject: 'admin token attempts' });
  let draining = false;
  let endDrain: (() => void) | undefined;
  // Every upstream wait is bounded by UPSTREAM_TIMEOUT_MS.
  const bounds = {
    timeoutMs: config.upstreamTimeoutMs,
    firstByteTimeoutMs: Math.min(config.firstByteTimeoutMs, config.upstreamTimeoutMs),
    idleTimeoutMs: Math.min(config.idleTimeoutMs, config.upstreamTimeoutMs),
    bodyLimitBytes: 64 * 1024 * 1024,
    maxSseEventBytes: config.maxSseEventBytes,
  };
  const caching = responseCaching(responseCache, () => live.current.config);
  // Asks Redis itself, so a stall shows (and clears) without any model request.
  const readiness = async () => {
    const redisState = redis ? ((await answersWithin(redis, 250)) ? 'ready' : 'unavailable') : 'not configured';
    const degraded = ledger.degraded() || !usage.healthy || redisState === 'unavailable';
    return {
      status: draining ? 'shutting down' : degraded ? 'degraded' : 'ok',
      redis: redisState,
      rate_limits: redis && !ledger.degraded() ? 'shared' : 'per-process',
      usage: usage.healthy ? 'stored' : 'queued until the store returns',
      config_version: live.current.version,
      // A refused reload leaves the previous configuration serving (still ready), stale until a reload
      // applies; the error says where the file is wrong, never what it holds (/readyz takes no credential).
      config_stale: live.lastError !== undefined,
      ...(live.lastError === undefined ? {} : { config_error: live.lastError }),
    };
  };
  // rate-limit-redis loads only with Redis configured.
  const signInStore = redis ? (await import('../stores/redis/shared-rate-store.ts')).sharedRateStore(redis, 'gw-signin:') : undefined;
  const authenticate = createAuthenticator({
    store: keys,
    teams,
    staticKeys: config.apiKeys,
    keyIdSecret: config.keyIdSecret,
    logger,
    throttle: keyThrottle,
  });
  const parts: ModelRouteParts = {
    registry: currentRegistry,
    endpoints,
    fallbacks: () => live.current.fallbacks,
    upstream,
    usage: accounting,
    bounds,
    bodyLimitBytes: config.bodyLimitBytes,
    clientWriteTimeoutMs: config.clientWriteTimeoutMs,
    authenticate,
    admission: { concurrency: new KeyConcurrency(config.keyConcurrency), rateLimit: modelRateLimit },
    budgets: new BudgetGate({ ledger, logger, allowUnbounded: config.limitsAllowUnbounded }),
    nativeChat: { ...DEFAULT_RETRY_POLICY, deadlineMs: config.chatDeadlineMs },
  };
  // Rebuilt when a reload applies: the cache and the guardrails are in the lists only while configured.
  const routesOf = (settings: LiveSettings) => modelRoutes(parts, { caching: caching.settings() ? caching : undefined, guardrails: settings.guardrails });
  let routes = routesOf(live.current);
  rebuildRoutes = (settings) => (routes = routesOf(settings));
  const access = { adminTokenEnabled: () => live.current.config.access.adminToken, tokens, audit, source };
  const health = async () => ({ readiness: await readiness(), providers: providerHealth(currentRegistry(), endpoints), aliases: aliasTable(currentRegistry()) });
  const app = createApp({
    source,
    routes: () => routes,
    registry: currentRegistry,
    bodyLimitBytes: config.bodyLimitBytes,
    logger,
    authenticate,
    catalogRateLimit,
    inFlight,
    addressOf: clientAddressResolver(config.trustedProxies),
    pendingRequests: new PendingRequests(config.maxPendingRequestsPerAddress, logger, () => metrics.refused('pending_requests_per_address')),
    mount: (expressApp, add, guard) => {
      if (config.metricsPort === undefined) add('get', '/metrics', metricsRoute(options.clusterWorker ? new PrimaryScrape() : metrics));
      add('get', '/openapi.json', (_req, res) => void res.type('application/json').send(OPENAPI_JSON));
      // Counted per client address, not against the key's own rpm: reading usage spends none of it.
      add('get', '/v1/usage', guard[0]!, catalogRateLimit, ownUsageRoute(usage));
      expressApp.use('/admin', adminRouter({ token: config.adminToken, keys, teams, registry: currentRegistry, bodyLimitBytes: config.bodyLimitBytes, usage, throttle: adminThrottle, limits: ledger, rate: () => live.current.config.rateLimit, responseCache, guardrailSettings: () => live.current.config.guardrails, guardrailActions, health, access: { ...access, enabled: config.access.oidc !== undefined } }));
      add('get', '/healthz', (_req, res) => void res.json({ status: 'ok' }));
      // 503 while anything runs degraded (or the gateway drains), so a balancer prefers healthy instances.
      // `?degraded=ready` answers 200 while degraded: for an orchestrator that takes every unready
      // replica out of service, where a shared Redis outage would otherwise stop all of them at once.
      add('get', '/readyz', async (req, res) => {
        const body = await readiness();
        const ready = body.status === 'ok' || (body.status === 'degraded' && req.query.degraded === 'ready');
        res.status(ready ? 200 : 503).json(body);
      });
      expressApp.use('/account', accountRouter({
        token: config.adminToken,
        keys,
        teams,
        limits: ledger,
        rate: () => live.current.config.rateLimit,
        usage,
        registry: currentRegistry,
        endpoints,
        readiness,
        sessions: redis ? new RedisSessionStore(redis) : new MemorySessionStore(),
        // Failed sign-ins per address are counted across every instance (a store error lets the attempt through).
        signInStore,
        bodyLimitBytes: config.bodyLimitBytes,
        guardrailSettings: () => live.current.config.guardrails,
        guardrailActions,
        responseCache,
        signOn: () => live.current.config.access.oidc,
        roles: () => live.current.config.access.roles,
        access,
        logger,
      }));
    },
  });

  const server = createServer(
    {
      // Slow clients: a request's headers, and the whole request with its body, must arrive in time
      // (408 and the connection closed otherwise), checked every second rather than Node's 30 s.
      headersTimeout: config.headersTimeoutMs,
      requestTimeout: config.requestTimeoutMs,
      connectionsCheckingInterval: Math.min(1000, config.headersTimeoutMs),
      keepAliveTimeout: 65_000,
    },
    app,
  );
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
  if (options.clusterWorker) answerFiguresRequests(metrics.registry);
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(config.port, config.host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  live.watch();
  const metricsServer = config.metricsPort === undefined || options.clusterWorker ? undefined : await serveMetrics(metrics, config.metricsPort, config.host);
  return {
    url: urlOf(server),
    source,
    metricsUrl: metricsServer && urlOf(metricsServer),
    metrics,
    server,
    keys,
    usage,
    limits: ledger,
    // Settlements ride along with the records: flushed after them.
    flushUsage: async () => {
      await accounting.flush();
      await ledger.flush();
    },
    endInFlight: () => endDrain?.(),
    reloadConfig: (trigger = 'SIGHUP') => live.reload(trigger),
    configVersion: () => live.current.version,
    async close(drainMs = config.drainMs) {
      draining = true;
      live.close();
      const closed = new Promise((resolve) => server.close(resolve));
      // Keep-alive connections become idle as their last response ends: close each as it does.
      const sweep = setInterval(() => server.closeIdleConnections(), 100);
      server.closeIdleConnections();
      const drained = Promise.all([closed, inFlight.idle()]).then(() => 'drained' as const);
      let timer: NodeJS.Timeout | undefined;
      const cut = new Promise<'cut'>((resolve) => {
        endDrain = () => resolve('cut');
        timer = setTimeout(endDrain, drainMs);
      });
      if ((await Promise.race([drained, cut])) === 'cut') {
        logger.warn({ open: inFlight.count, drainMs }, 'shutdown: drain time over, ending the requests still open (their usage is recorded, estimated where needed)');
        server.closeAllConnections();
      }
      clearTimeout(timer);
      // Ended handlers record their usage as they unwind: wait for each before flushing.
      await drained;
      clearInterval(sweep);
      await accounting.flush();
      await ledger.close();
      await upstream.close();
      // What is still queued goes out now; a collector that is away loses it (the stop waits 5 s at most).
      await withinMs(Promise.all([tracing?.shutdown(), otlpMetrics?.shutdown()]), 5000);
      sharedBreaker?.stop();
      unobserve();
      untrace?.();
      if (metricsServer) await new Promise((resolve) => metricsServer.close(resolve));
      await auditTrail.close();
      await stores.close();
    },
  };
}

/** One start-up line per guardrail plugin, where it came from. */
function logGuardrailPlugins(logger: Logger, plugins: readonly GuardrailPlugin[]): void {
  for (const plugin of plugins) {
    const directory = originOf(plugin);
    logger.info({ guardrail: plugin.guardrail, directory }, `guardrail plugin '${plugin.guardrail}' loaded from ${directory}`);
  }
}
