import type { AlertLog } from '../../stores/alerts/alert-log.ts';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import express, { Router, type RequestHandler } from 'express';
import type { Store } from 'express-rate-limit';
import type { Logger } from 'pino';
import type { KeyStore } from '../../stores/keys/key-store.ts';
import { routeNotFound } from '../../core/gateway-errors.ts';
import type { RoleMapping } from '../../core/access.ts';
import type { RateSettings } from '../../core/limits.ts';
import type { ModelRegistry } from '../../core/model-registry.ts';
import type { ResponseCache } from '../../core/response-cache.ts';
import type { ProviderEndpoints } from '../../data-plane/upstream/endpoint-pool.ts';
import type { GuardrailSettings } from '../../guardrails/guardrail-settings.ts';
import type { UsageStore } from '../../usage/usage-accounting.ts';
import type { LimitLedger } from '../../usage/limit-ledger.ts';
import type { TeamStore } from '../../stores/teams/team-store.ts';
import type { GroupStore } from '../../stores/groups/group-store.ts';
import type { OidcSettings } from '../../config/access-config.ts';
import { aliasTable, providerHealth, type HealthView } from './account-health.ts';
import { accountSessions, type AccountSessions, sameOriginOnly } from './account-sessions.ts';
import type { SessionStore } from '../../stores/session-store.ts';
import type { GuardrailActionLog } from '../../stores/guardrail-actions/guardrail-action-log.ts';
import { managementRouter } from '../management-router.ts';
import { accessGate } from '../access/access-gate.ts';
import { MANAGEMENT_ROUTES } from '../access/permissions.ts';
import { routesOf } from '../access/route-list.ts';
import type { AccessOptions } from '../admin/admin-routes.ts';
import { singleSignOn } from './single-sign-on.ts';
/** The page's static files (plain HTML, CSS and ES modules, served as they are in the source tree). */
export const ACCOUNT_WEB_DIR = fileURLToPath(new URL('../../../web/account/', import.meta.url));

/** Chart.js's self-contained UMD build, served from the installed package (no copy in the repository). */
export const CHART_SCRIPT = join(dirname(createRequire(import.meta.url).resolve('chart.js')), 'chart.umd.min.js');

/** No inline script or style, no third-party origin, no framing: the page runs only its own files. */
export const ACCOUNT_CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data:",
  "connect-src 'self'",
  "form-action 'self'",
  "base-uri 'none'",
  "frame-ancestors 'none'",
].join('; ');

export const ENABLE_HINT =
  'GATEWAY_ADMIN_TOKEN is not set and single sign-on is not configured, so there is nothing to sign in with. Set GATEWAY_ADMIN_TOKEN to a random secret of at least 32 characters (for example the output of: openssl rand -hex 32), restart the gateway, and sign in here with that token; or configure single sign-on with your identity provider (access.oidc, see docs/access.md).';

export interface AccountRouterOptions {
  /** `GATEWAY_ADMIN_TOKEN`; without it the page only says how to enable it and the API answers 404. */
  readonly token: string | undefined;
  readonly keys: KeyStore;
  readonly usage: UsageStore;
  readonly registry: () => ModelRegistry;
  readonly endpoints: ProviderEndpoints;
  /** The `/readyz` answer. */
  readonly readiness: () => Promise<Readonly<Record<string, string | boolean>>>;
  readonly sessions: SessionStore;
  readonly sessionTtlMs?: number;
  readonly signInLimit?: { readonly max: number; readonly windowMs: number };
  readonly signInStore?: Store;
  readonly bodyLimitBytes?: number;
  readonly now?: () => number;
  /** The teams `/teams` manages and `GET /limits` lists; without it there are no team routes and no teams listed. */
  readonly teams?: TeamStore;
  /** The budget groups `/groups` manages; without it there are no group routes. */
  readonly groups?: GroupStore;
  /** Where `GET /limits` reads request, token and money use; without it the limits are listed with no use figures. */
  readonly limits?: Pick<LimitLedger, 'peek'>;
  /**
   * The request limit in force (`config.rateLimit`, read per request), for `GET /limits`; the gateway's default when
   * absent.
   */
  readonly rate?: () => RateSettings;
  /**
   * The guardrails the configuration in force holds (`config.guardrails`, read per request): listed by
   * `GET /guardrails`, and what `guardrails` of keys and teams are checked against; none when absent.
   */
  readonly guardrailSettings?: () => readonly GuardrailSettings[];
  /** The newest guardrail actions, for `GET /guardrails/actions`; that path answers 404 without it. */
  readonly guardrailActions?: Pick<GuardrailActionLog, 'recent'>;
  /** Limit alerts' last firings and webhook deliveries (`/alerts`, `/alerts/deliveries`). */
  readonly alerts?: Pick<AlertLog, 'lastFirings' | 'deliveries'>;
  /** The response cache `DELETE /cache` empties (with `teams`). */
  readonly responseCache?: ResponseCache;
  /** Single sign-on in force (read per sign-in); none: the admin token only. */
  readonly signOn?: () => OidcSettings | undefined;
  /** The role mapping in force (read per request). */
  readonly roles?: () => readonly RoleMapping[];
  /** Service tokens, the audit log, the admin token's switch, this gateway's name in events. */
  readonly access?: AccessOptions;
  readonly logger?: Logger;
}

const securityHeaders: RequestHandler = function securityHeaders(_req, res, next) {
  res.setHeader('Content-Security-Policy', ACCOUNT_CSP);
  res.setHeader('X-Content-Type-Options', 'nosniff');
  res.setHeader('Referrer-Policy', 'no-referrer');
  res.setHeader('X-Frame-Options', 'DENY');
  res.setHeader('Cross-Origin-Opener-Policy', 'same-origin');
  res.setHeader('Cross-Origin-Resource-Policy', 'same-origin');
  next();
};

const noStore: RequestHandler = (_req, res, next) => {
  res.setHeader('Cache-Control', 'no-store');
  next();
};

/**
 * The account page, mounted at `/account`: the static page and Chart.js, and under `/account/api`
 * sign-in/out (`POST`/`GET`/`DELETE /session`), the admin API's key and usage operations
 * (`/keys`, `/usage`) behind the session, `GET /usage.csv`, `GET /models`, `GET /health`, `GET /limits`
 * (every key's and team's limits and their use now, see `limitUseView`), the admin API's team operations
 * (`/teams`, see `teamRoutes`), `GET /guardrails` (the configured guardrails) and `GET /guardrails/actions`
 * (the newest guardrail actions, see `guardrailActionsRoute`), `GET /alerts` and `/alerts/deliveries` (limit
 * alerts' last firings and webhook deliveries, see `alertRoutes`).
 */
export function accountRouter(options: AccountRouterOptions): Router {
  const router = Router();
  router.use(securityHeaders);
  servePage(router);
  const api = Router();
  router.use('/api', noStore, api);
  const signOn = options.signOn?.() !== undefined ? options.signOn : undefined;
  if (!options.token && !signOn) {
    serveEnableHint(api);
    return router;
  }
  const sessions = sessionsOf(options, signOn);
  serveSignIn(api, options, sessions, signOn);
  api.use(sessions.requireSession);
  api.delete('/session', sessions.signOut);
  serveManagement(api, options);
  return router;
}

/** With nothing to sign in with: the session says how to enable it, every other path is a 404. */
function serveEnableHint(api: Router): void {
  api.get('/session', (_req, res) => void res.json({ enabled: false, signed_in: false, detail: ENABLE_HINT }));
  api.use((req, _res, next) => next(routeNotFound(req.method, req.originalUrl.split('?')[0]!)));
}

/** Signing in with the admin token (`POST /session`), the session's state, and single sign-on when configured. */
function serveSignIn(
  api: Router,
  options: AccountRouterOptions,
  sessions: AccountSessions,
  signOn: AccountRouterOptions['signOn'],
): void {
  api.post('/session', sameOriginOnly, sessions.throttle, sessions.signIn);
  api.get('/session', sessions.state);
  if (signOn) {
    const { sessions: store, logger, now } = options;
    const sso = singleSignOn({
      settings: signOn,
      store,
      storeKey: sessions.storeKey,
      startSession: sessions.startSession,
      hasRole: sessions.hasRole,
      logger,
      now,
    });
    api.get('/sso', sso.start);
    api.get('/sso/callback', sso.callback);
  }
}

/** The management routes, behind the session and the access gate (each route's permission: `MANAGEMENT_ROUTES`). */
function serveManagement(api: Router, options: AccountRouterOptions): void {
  const access = options.access ?? {};
  const health = async (): Promise<HealthView> => {
    const registry = options.registry();
    return {
      readiness: await options.readiness(),
      providers: providerHealth(registry, options.endpoints),
      aliases: aliasTable(registry),
    };
  };
  const management = managementRouter({ ...options, health, tokens: access.tokens, audit: access.audit });
  api.use(
    accessGate({
      rules: MANAGEMENT_ROUTES,
      routes: () => routesOf(management),
      keys: options.keys,
      via: 'account',
      source: access.source,
    }),
  );
  api.use(management);
}

/** The page itself, its scripts and styles, and Chart.js, served as they are. */
function servePage(router: Router): void {
  router.get('/', (_req, res) => {
    res.setHeader('Cache-Control', 'no-cache');
    res.sendFile(join(ACCOUNT_WEB_DIR, 'index.html'));
  });
  router.get('/vendor/chart.umd.min.js', (_req, res) => {
    res.setHeader('Cache-Control', 'no-cache');
    res.sendFile(CHART_SCRIPT, { headers: { 'Content-Type': 'text/javascript; charset=utf-8' } });
  });
  router.use(
    express.static(ACCOUNT_WEB_DIR, { index: false, redirect: false, dotfiles: 'deny', cacheControl: true, maxAge: 0 }),
  );
}

/** The page's sessions: signed in with the admin token, or with single sign-on when configured. */
function sessionsOf(options: AccountRouterOptions, signOn: AccountRouterOptions['signOn']): AccountSessions {
  const access = options.access ?? {};
  return accountSessions({
    token: options.token,
    adminTokenEnabled: access.adminTokenEnabled,
    // Without the admin token, the client's own secret (or id) keys the store's HMAC of session ids.
    secret: options.token ?? signOn?.()?.clientSecret ?? `sso:${signOn?.()?.clientId}`,
    roles: options.roles,
    source: access.source,
    signOn: signOn !== undefined,
    store: options.sessions,
    ttlMs: options.sessionTtlMs,
    signInLimit: options.signInLimit,
    signInStore: options.signInStore,
    now: options.now,
  });
}
