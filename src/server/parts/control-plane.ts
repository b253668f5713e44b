import type { Router } from 'express';
import type { Store } from 'express-rate-limit';
import type { Logger } from 'pino';
import type { GatewayConfig } from '../../config/gateway-config.ts';
import { accountRouter } from '../../control-plane/account/account-router.ts';
import { aliasTable, providerHealth } from '../../control-plane/account/account-health.ts';
import { adminRouter } from '../../control-plane/admin/admin-routes.ts';
import type { AppOptions } from '../../control-plane/app.ts';
import { metricsRoute } from '../../control-plane/metrics-route.ts';
import { OPENAPI_DOCUMENT } from '../../control-plane/openapi/openapi-document.ts';
import { ownUsageRoute } from '../../control-plane/usage-routes.ts';
import { PrimaryScrape } from '../../ops/cluster-metrics.ts';
import type { OpenStores } from '../../stores/open-stores.ts';
import { MemorySessionStore, RedisSessionStore } from '../../stores/session-store.ts';
import type { LimitLedger } from '../../usage/limit-ledger.ts';
import type { UsageStore } from '../../usage/usage-accounting.ts';
import type { Configuration } from './configuration.ts';
import type { Limits } from './limits.ts';
import type { ModelServing } from './model-serving.ts';
import type { Observability } from './observability.ts';
import type { Readiness } from './readiness.ts';

const OPENAPI_JSON = JSON.stringify(OPENAPI_DOCUMENT);

/** Where the control plane's parts come from. */
export interface ControlPlaneParts {
  readonly configuration: Configuration;
  readonly stores: OpenStores<UsageStore, LimitLedger>;
  readonly observability: Observability;
  readonly limits: Limits;
  readonly serving: ModelServing;
  readonly readiness: Readiness;
  /** A cluster worker: `/metrics` answers with the whole cluster's figures, gathered by the primary. */
  readonly clusterWorker?: boolean;
}

/**
 * The control plane's routes, mounted before the 404: `/metrics` (unless on its own port), the OpenAPI
 * document, the caller's own usage, health and readiness, the admin API (bearer) and the account page
 * with its API (session); the management routes are the same behind both.
 */
export async function controlPlaneRoutes(
  config: GatewayConfig,
  logger: Logger,
  parts: ControlPlaneParts,
): Promise<NonNullable<AppOptions['mount']>> {
  const signInStore = await signInRateStore(parts.stores.redis);
  const shared = sharedOptions(config, parts);
  const admin = adminApi(config, parts, shared);
  const account = accountPage(config, logger, parts, shared, signInStore);
  return mountRoutes(config, parts, admin, account);
}

/**
 * Where failed sign-ins per address are counted across instances: in Redis when it is configured (rate-limit-redis
 * loads only then).
 */
async function signInRateStore(redis: OpenStores<UsageStore, LimitLedger>['redis']): Promise<Store | undefined> {
  return redis
    ? (await import('../../stores/redis/shared-rate-store.ts')).sharedRateStore(redis, 'gw-signin:')
    : undefined;
}

type SharedOptions = ReturnType<typeof sharedOptions>;

/**
 * What the admin API and the account page share: the settings in force, what they manage (the management routes'
 * stores and settings) and access control's parts.
 */
function sharedOptions(config: GatewayConfig, parts: ControlPlaneParts) {
  const { configuration, stores, observability, serving } = parts;
  const { keys, teams, groups, usage, ledger, guardrailActions, tokens, audit, alerts } = stores;
  const { live } = configuration;
  const settings = () => live.current.config;
  const managed = {
    keys,
    teams,
    groups,
    registry: configuration.registry,
    bodyLimitBytes: config.bodyLimitBytes,
    usage,
    limits: ledger,
    rate: () => settings().rateLimit,
    responseCache: serving.responseCache,
    guardrailSettings: () => settings().guardrails,
    guardrailActions,
    alerts,
  };
  const access = { adminTokenEnabled: () => settings().access.adminToken, tokens, audit, source: observability.source };
  return { settings, managed, access };
}

/** The admin API (bearer): served without the admin token too when single sign-on is configured (service tokens). */
function adminApi(config: GatewayConfig, parts: ControlPlaneParts, { managed, access }: SharedOptions): Router {
  const { configuration, limits, readiness } = parts;
  const { registry, endpoints } = configuration;
  const health = async () => ({
    readiness: await readiness.read(),
    providers: providerHealth(registry(), endpoints),
    aliases: aliasTable(registry()),
  });
  return adminRouter({
    ...managed,
    token: config.adminToken,
    throttle: limits.adminThrottle,
    health,
    access: { ...access, enabled: config.access.oidc !== undefined },
  });
}

/** The account page and its API, its sessions kept in Redis when Redis is configured (else in memory). */
function accountPage(
  config: GatewayConfig,
  logger: Logger,
  parts: ControlPlaneParts,
  { settings, managed, access }: SharedOptions,
  signInStore: Store | undefined,
): Router {
  const { redis } = parts.stores;
  return accountRouter({
    ...managed,
    token: config.adminToken,
    endpoints: parts.configuration.endpoints,
    readiness: parts.readiness.read,
    sessions: redis ? new RedisSessionStore(redis) : new MemorySessionStore(),
    signInStore,
    signOn: () => settings().access.oidc,
    roles: () => settings().access.roles,
    access,
    logger,
  });
}

/** Mounts the control plane's routes in their order (see {@link controlPlaneRoutes}). */
function mountRoutes(
  config: GatewayConfig,
  parts: ControlPlaneParts,
  admin: Router,
  account: Router,
): NonNullable<AppOptions['mount']> {
  const { observability, limits, readiness } = parts;
  const { usage } = parts.stores;
  const scrape = parts.clusterWorker ? new PrimaryScrape() : observability.metrics;
  return (app, add, guard) => {
    if (config.metricsPort === undefined) add('get', '/metrics', metricsRoute(scrape));
    add('get', '/openapi.json', (_req, res) => void res.type('application/json').send(OPENAPI_JSON));
    // Counted per client address, not against the key's own rpm: reading usage spends none of it.
    add('get', '/v1/usage', guard[0]!, limits.rates.perAddress, ownUsageRoute(usage));
    app.use('/admin', admin);
    add('get', '/healthz', (_req, res) => void res.json({ status: 'ok' }));
    add('get', '/readyz', readiness.route);
    app.use('/account', account);
  };
}
