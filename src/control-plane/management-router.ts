import { Router, type RequestHandler } from 'express';
import { actorOf } from '../core/access.ts';
import type { RateSettings } from '../core/limits.ts';
import type { ModelRegistry } from '../core/model-registry.ts';
import type { ResponseCache } from '../core/response-cache.ts';
import type { GuardrailSettings } from '../guardrails/guardrail-settings.ts';
import type { AuditStore } from '../stores/audit/audit-store.ts';
import type { GuardrailActionLog } from '../stores/guardrail-actions/guardrail-action-log.ts';
import type { AlertLog } from '../stores/alerts/alert-log.ts';
import type { KeyStore } from '../stores/keys/key-store.ts';
import type { TeamStore } from '../stores/teams/team-store.ts';
import type { GroupStore } from '../stores/groups/group-store.ts';
import type { TokenStore } from '../stores/tokens/token-store.ts';
import type { LimitLedger } from '../usage/limit-ledger.ts';
import type { UsageStore } from '../usage/usage-accounting.ts';
import {
  accessGroupStore,
  accessAlertLog,
  accessGuardrailActions,
  accessKeyStore,
  accessResponseCache,
  accessTeamStore,
  accessUsageStore,
} from './access/access-stores.ts';
import { principalOf } from './access/access-gate.ts';
import { auditRoute } from './access/audit-route.ts';
import { PERMISSIONS, scopeOf, type Permission } from './access/permissions.ts';
import { tokenRoutes } from './access/token-routes.ts';
import type { HealthView } from './account/account-health.ts';
import { usageCsv, usageCsvName } from './account/usage-csv.ts';
import { canonicalModelIds, keyRoutes } from './admin/key-routes.ts';
import { cacheRoutes } from './admin/cache-routes.ts';
import { teamRoutes } from './admin/team-routes.ts';
import { groupRoutes } from './admin/group-routes.ts';
import { alertRoutes } from './alert-routes.ts';
import { guardrailActionsRoute } from './guardrail-actions-route.ts';
import { guardrailListRoute, guardrailNames } from './guardrail-list.ts';
import { limitsRoute } from './limit-use.ts';
import { adminUsageRoute, parseUsageQuery, readUsage } from './usage-routes.ts';

/** What the management routes manage and read; a route whose part is absent is not served. */
export interface ManagementOptions {
  readonly keys: KeyStore;
  /** The teams keys may name; without it there are no team and cache routes, and no teams listed. */
  readonly teams?: TeamStore;
  /** The budget groups keys and teams may name; without it there are no group routes, and naming a group is refused. */
  readonly groups?: GroupStore;
  /**
   * The current registry, to check that a key's `models` are canonical IDs (and to list them); unchecked when absent.
   */
  readonly registry?: () => ModelRegistry;
  readonly bodyLimitBytes?: number;
  /** Usage read-back (`/usage`, `/usage.csv`). */
  readonly usage?: UsageStore;
  /** Where `/limits` reads request, token and money use; without it the limits are listed with no use figures. */
  readonly limits?: Pick<LimitLedger, 'peek'>;
  /** The request limit in force, read per request; the gateway's default when absent. */
  readonly rate?: () => RateSettings;
  /** The response cache `DELETE /cache` empties; without one it deletes nothing. */
  readonly responseCache?: ResponseCache;
  /** The guardrails in force (read per request): listed, and what keys' and teams' `guardrails` are checked against. */
  readonly guardrailSettings?: () => readonly GuardrailSettings[];
  /** The newest guardrail actions (`/guardrails/actions`). */
  readonly guardrailActions?: Pick<GuardrailActionLog, 'recent'>;
  /** Readiness, endpoints and aliases (`/health`). */
  readonly health?: () => Promise<HealthView>;
  /** Limit alerts' last firings and webhook deliveries (`/alerts`, `/alerts/deliveries`). */
  readonly alerts?: Pick<AlertLog, 'lastFirings' | 'deliveries'>;
  /** Service tokens (`/tokens`). */
  readonly tokens?: TokenStore;
  /** The audit log (`/audit`). */
  readonly audit?: Pick<AuditStore, 'page'>;
  readonly now?: () => number;
}

/** A cache that holds nothing: a clear without a configured cache still checks its target and is recorded. */
const NO_CACHE: ResponseCache = {
  get: () => undefined,
  set: () => {},
  delete: () => {},
  clear: async () => 0,
  close: async () => {},
};

/** `GET /whoami`: who the request acts as, its roles, and where it holds each permission (`all` or team names). */
const whoami: RequestHandler = (_req, res) => {
  const principal = principalOf(res);
  const permissions: Record<string, 'all' | string[]> = {};
  for (const permission of Object.keys(PERMISSIONS) as Permission[]) {
    if (permission === 'public') continue;
    const scope = scopeOf(principal, permission);
    if (scope) permissions[permission] = scope === 'all' ? 'all' : [...scope].sort();
  }
  const { kind, id, name, roles } = actorOf(principal);
  res.json({ actor: { kind, id, name: name ?? null }, roles, permissions });
};

/**
 * The management routes, one router mounted at `/admin` (bearer) and at `/account/api` (session and
 * CSRF), behind the access gate: keys and usage ({@link keyRoutes}), teams ({@link teamRoutes}), budget
 * groups ({@link groupRoutes}), limits, limit alerts,
 * the response cache ({@link cacheRoutes}), guardrails and their actions, models, health, service
 * tokens, the audit log and `whoami`. Each is declared once with its permission (`MANAGEMENT_ROUTES`).
 * The stores are seen through the access stores: scoped to a team role's teams, every change published.
 */
export function managementRouter(options: ManagementOptions): Router {
  const router = Router();
  const stores = scopedStores(options);
  serveCallerAndGateway(router, options);
  serveUsageCsv(router, stores);
  serveLimitsAndGuardrails(router, options, stores);
  serveRecords(router, options, stores);
  serveAccessRecords(router, options);
  return router;
}

/** The stores the routes work on, through the access stores. */
interface ScopedStores {
  readonly keys: KeyStore;
  readonly teams?: TeamStore;
  readonly groups?: GroupStore;
  readonly usage?: UsageStore;
}

function scopedStores(options: ManagementOptions): ScopedStores {
  return {
    keys: accessKeyStore(options.keys, options.teams),
    teams: options.teams && accessTeamStore(options.teams),
    groups: options.groups && accessGroupStore(options.groups),
    usage: options.usage && accessUsageStore(options.usage, options.keys, options.teams),
  };
}

/** Who the caller is (`/whoami`), and what the gateway serves (`/models`) and how it is (`/health`). */
function serveCallerAndGateway(router: Router, options: ManagementOptions): void {
  router.get('/whoami', whoami);
  if (options.registry) {
    const registry = options.registry;
    router.get(
      '/models',
      (_req, res) => void res.json({ object: 'list', data: [...canonicalModelIds(registry())].sort() }),
    );
  }
  if (options.health) {
    const health = options.health;
    router.get('/health', async (_req, res) => void res.json(await health()));
  }
}

/** `GET /usage.csv`, with usage read-back: the usage a query asks for, as a CSV file. */
function serveUsageCsv(router: Router, { keys, teams, usage }: ScopedStores): void {
  if (!usage) return;
  router.get('/usage.csv', async (req, res) => {
    const query = parseUsageQuery(req.query, true);
    const rows = await readUsage(usage, keys, query, teams);
    res.setHeader('Content-Type', 'text/csv; charset=utf-8');
    res.setHeader('Content-Disposition', `attachment; filename="${usageCsvName(query)}"`);
    res.send(usageCsv(rows, query.groupBy));
  });
}

/** The limits and their use, limit alerts, guardrail actions and the configured guardrails. */
function serveLimitsAndGuardrails(router: Router, options: ManagementOptions, { keys, teams }: ScopedStores): void {
  router.get('/limits', limitsRoute({ keys, teams, limits: options.limits, rate: options.rate, now: options.now }));
  if (options.alerts) router.use(alertRoutes(accessAlertLog(options.alerts)));
  if (options.guardrailActions)
    router.get('/guardrails/actions', guardrailActionsRoute(accessGuardrailActions(options.guardrailActions)));
  router.get('/guardrails', guardrailListRoute(options.guardrailSettings ?? (() => [])));
}

/** The records the API manages: keys (with `/usage`), budget groups, teams, and the response cache. */
function serveRecords(router: Router, options: ManagementOptions, { keys, teams, groups, usage }: ScopedStores): void {
  const guardrails = guardrailNames(options.guardrailSettings);
  // A revoked key's and a deleted team's entries are emptied too.
  const responseCache = options.responseCache && accessResponseCache(options.responseCache);
  const usageRoute = usage && adminUsageRoute(usage, keys, teams);
  const { bodyLimitBytes, registry, limits, now } = options;
  router.use(
    keyRoutes({ keys, teams, groups, registry, bodyLimitBytes, usage: usageRoute, guardrails, responseCache }),
  );
  if (groups) router.use(groupRoutes({ groups, keys, teams, limits, bodyLimitBytes, now }));
  if (teams) {
    router.use(teamRoutes({ keys, teams, groups, bodyLimitBytes, guardrails, responseCache }));
    router.use(cacheRoutes({ keys, teams, responseCache: responseCache ?? accessResponseCache(NO_CACHE) }));
  }
}

/** Service tokens and the audit log. */
function serveAccessRecords(router: Router, options: ManagementOptions): void {
  if (options.tokens)
    router.use(tokenRoutes({ tokens: options.tokens, bodyLimitBytes: options.bodyLimitBytes, now: options.now }));
  if (options.audit) router.get('/audit', auditRoute(options.audit));
}
