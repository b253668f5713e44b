import { Router } from 'express';
import type { FailedAuthThrottle } from '../../data-plane/pipeline/authenticate.ts';
import type { KeyStore } from '../../stores/keys/key-store.ts';
import type { TeamStore } from '../../stores/teams/team-store.ts';
import type { GroupStore } from '../../stores/groups/group-store.ts';
import { routeNotFound } from '../../core/gateway-errors.ts';
import type { RateSettings } from '../../core/limits.ts';
import type { ModelRegistry } from '../../core/model-registry.ts';
import type { ResponseCache } from '../../core/response-cache.ts';
import type { LimitLedger } from '../../usage/limit-ledger.ts';
import type { UsageStore } from '../../usage/usage-accounting.ts';
import type { GuardrailSettings } from '../../guardrails/guardrail-settings.ts';
import type { GuardrailActionLog } from '../../stores/guardrail-actions/guardrail-action-log.ts';
import type { TokenStore } from '../../stores/tokens/token-store.ts';
import type { AuditStore } from '../../stores/audit/audit-store.ts';
import type { AlertLog } from '../../stores/alerts/alert-log.ts';
import { accessGate } from '../access/access-gate.ts';
import { bearerPrincipal } from '../access/bearer-principal.ts';
import { MANAGEMENT_ROUTES } from '../access/permissions.ts';
import { routesOf } from '../access/route-list.ts';
import type { HealthView } from '../account/account-health.ts';
import { managementRouter } from '../management-router.ts';

export { canonicalModelIds, keyRoutes, keyView, type KeyView } from './key-routes.ts';

/** Access control of the control plane, shared by the admin API and the account page. */
export interface AccessOptions {
  /** Serve the admin API even without `GATEWAY_ADMIN_TOKEN` (single sign-on is configured: service tokens work). */
  readonly enabled?: boolean;
  /** Whether the admin token is accepted now (`access.adminToken`, read per request); true when absent. */
  readonly adminTokenEnabled?: () => boolean;
  /** Service tokens: bearer credentials with a role, and `/tokens`. */
  readonly tokens?: TokenStore;
  /** The audit log, for `/audit`. */
  readonly audit?: Pick<AuditStore, 'page'>;
  /** Names this gateway in the events it publishes (the audit log keeps its own gateway's). */
  readonly source?: object;
}

export interface AdminRouterOptions {
  /** `GATEWAY_ADMIN_TOKEN`; without it (and without `access.enabled`) every admin path answers 404. */
  readonly token: string | undefined;
  readonly keys: KeyStore;
  /** The teams keys may name (`/admin/teams`). */
  readonly teams: TeamStore;
  /** The budget groups keys and teams may name (`/admin/groups`). */
  readonly groups?: GroupStore;
  /** The current registry, to check that a key's `models` are canonical IDs; unchecked when absent. */
  readonly registry?: () => ModelRegistry;
  readonly bodyLimitBytes?: number;
  /** `GET /admin/usage` and `/admin/usage.csv`, when given. */
  readonly usage?: UsageStore;
  /** Counts wrong admin tokens per client address (429 past the limit); a budget of its own, not the API keys'. */
  readonly throttle?: FailedAuthThrottle;
  /**
   * Where `GET /admin/limits` reads request, token and money use; without it the limits are listed with no use figures.
   */
  readonly limits?: Pick<LimitLedger, 'peek'>;
  /**
   * The request limit in force (`config.rateLimit`, read per request), for `GET /admin/limits`; the gateway's default
   * when absent.
   */
  readonly rate?: () => RateSettings;
  /** The response cache `DELETE /admin/cache` empties; without one (no cache configured) it deletes nothing. */
  readonly responseCache?: ResponseCache;
  /**
   * The guardrails the configuration in force holds (`config.guardrails`, read per request): listed by
   * `GET /admin/guardrails`, and what `guardrails` of keys and teams are checked against; none listed and unchecked
   * when absent.
   */
  readonly guardrailSettings?: () => readonly GuardrailSettings[];
  /** The newest guardrail actions, for `GET /admin/guardrails/actions`; that path answers 404 without it. */
  readonly guardrailActions?: Pick<GuardrailActionLog, 'recent'>;
  /** Readiness, endpoints and aliases, for `GET /admin/health`. */
  readonly health?: () => Promise<HealthView>;
  /** Limit alerts, for `GET /admin/alerts` and `/admin/alerts/deliveries`; those paths answer 404 without it. */
  readonly alerts?: Pick<AlertLog, 'lastFirings' | 'deliveries'>;
  readonly access?: AccessOptions;
}

/**
 * The admin API, mounted at `/admin`: the management router (keys, teams, limits, usage, the cache,
 * guardrails, service tokens, the audit log; see `managementRouter`) behind `Authorization: Bearer`:
 * the admin token (break-glass admin, unless switched off) or a service token with its role, then the
 * access gate (each route's declared permission). Without a token configured and access off, the admin
 * API does not exist (404).
 */
export function adminRouter(options: AdminRouterOptions): Router {
  const router = Router();
  const access = options.access ?? {};
  if (!options.token && !access.enabled) {
    router.use((req, _res, next) => next(routeNotFound(req.method, req.originalUrl.split('?')[0]!)));
    return router;
  }
  router.use(
    bearerPrincipal({
      adminToken: options.token,
      adminTokenEnabled: access.adminTokenEnabled,
      tokens: access.tokens,
      throttle: options.throttle,
      source: access.source,
    }),
  );
  const management = managementRouter({ ...options, tokens: access.tokens, audit: access.audit });
  router.use(
    accessGate({
      rules: MANAGEMENT_ROUTES,
      routes: () => routesOf(management),
      keys: options.keys,
      via: 'admin',
      source: access.source,
    }),
  );
  router.use(management);
  return router;
}
