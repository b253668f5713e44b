import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import express, { Router, type RequestHandler } from 'express';
import type { Store } from 'express-rate-limit';
import { canonicalModelIds, keyRoutes } from '../admin/admin-routes.ts';
import type { KeyStore } from '../../stores/keys/key-store.ts';
import { routeNotFound } from '../../core/gateway-errors.ts';
import type { RateSettings } from '../../core/limits.ts';
import type { ModelRegistry } from '../../core/model-registry.ts';
import type { ProviderEndpoints } from '../../data-plane/upstream/provider-endpoints.ts';
import { adminUsageRoute, parseUsageQuery, readUsage } from '../usage-routes.ts';
import { teamRoutes } from '../admin/team-routes.ts';
import type { GuardrailSettings } from '../../guardrails/guardrail-settings.ts';
import { guardrailListRoute, guardrailNames } from '../guardrail-list.ts';
import type { UsageStore } from '../../usage/usage-store.ts';
import type { LimitLedger } from '../../usage/limit-ledger.ts';
import type { TeamStore } from '../../stores/teams/team-store.ts';
import { limitsRoute } from '../limit-use.ts';
import { aliasTable, providerHealth, type HealthView } from './account-health.ts';
import { accountSessions, sameOriginOnly } from './account-sessions.ts';
import type { SessionStore } from '../../stores/session-store.ts';
import type { GuardrailActionLog } from '../../stores/guardrail-actions/guardrail-action-log.ts';
import { guardrailActionsRoute } from '../guardrail-actions-route.ts';
import { usageCsv, usageCsvName } from './usage-csv.ts';

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
  'GATEWAY_ADMIN_TOKEN is not set, so there is nothing to sign in with. Set it to a random secret of at least 32 characters (for example the output of: openssl rand -hex 32), restart the gateway, and sign in here with that token.';

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
  /** Where `GET /limits` reads request, token and money use; without it the limits are listed with no use figures. */
  readonly limits?: Pick<LimitLedger, 'peek'>;
  /** The request limit in force (`config.rateLimit`, read per request), for `GET /limits`; the gateway's default when absent. */
  readonly rate?: () => RateSettings;
  /**
   * The guardrails the configuration in force holds (`config.guardrails`, read per request): listed by
   * `GET /guardrails`, and what `guardrails` of keys and teams are checked against; none when absent.
   */
  readonly guardrailSettings?: () => readonly GuardrailSettings[];
  /** The newest guardrail actions, for `GET /guardrails/actions`; that path answers 404 without it. */
  readonly guardrailActions?: Pick<GuardrailActionLog, 'recent'>;
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
 * (the newest guardrail actions, see `guardrailActionsRoute`).
 */
export function accountRouter(options: AccountRouterOptions): Router {
  const router = Router();
  router.use(securityHeaders);
  const page: RequestHandler = (_req, res) => {
    res.setHeader('Cache-Control', 'no-cache');
    res.sendFile(join(ACCOUNT_WEB_DIR, 'index.html'));
  };
  router.get('/', page);
  router.get('/vendor/chart.umd.min.js', (_req, res) => {
    res.setHeader('Cache-Control', 'no-cache');
    res.sendFile(CHART_SCRIPT, { headers: { 'Content-Type': 'text/javascript; charset=utf-8' } });
  });
  router.use(express.static(ACCOUNT_WEB_DIR, { index: false, redirect: false, dotfiles: 'deny', cacheControl: true, maxAge: 0 }));

  const api = Router();
  router.use('/api', noStore, api);
  if (!options.token) {
    api.get('/session', (_req, res) => void res.json({ enabled: false, signed_in: false, detail: ENABLE_HINT }));
    api.use((req, _res, next) => next(routeNotFound(req.method, req.originalUrl.split('?')[0]!)));
    return router;
  }

  const sessions = accountSessions({
    token: options.token,
    store: options.sessions,
    ttlMs: options.sessionTtlMs,
    signInLimit: options.signInLimit,
    signInStore: options.signInStore,
    now: options.now,
  });
  api.post('/session', sameOriginOnly, sessions.throttle, sessions.signIn);
  api.get('/session', sessions.state);
  api.use(sessions.requireSession);
  api.delete('/session', sessions.signOut);
  api.get('/models', (_req, res) => void res.json({ object: 'list', data: [...canonicalModelIds(options.registry())].sort() }));
  api.get('/health', async (_req, res) => {
    const registry = options.registry();
    const view: HealthView = { readiness: await options.readiness(), providers: providerHealth(registry, options.endpoints), aliases: aliasTable(registry) };
    res.json(view);
  });
  api.get('/usage.csv', async (req, res) => {
    const query = parseUsageQuery(req.query, true);
    const rows = await readUsage(options.usage, options.keys, query);
    res.setHeader('Content-Type', 'text/csv; charset=utf-8');
    res.setHeader('Content-Disposition', `attachment; filename="${usageCsvName(query)}"`);
    res.send(usageCsv(rows, query.groupBy));
  });
  api.get('/limits', limitsRoute({ keys: options.keys, teams: options.teams, limits: options.limits, rate: options.rate, now: options.now }));
  if (options.guardrailActions) api.get('/guardrails/actions', guardrailActionsRoute(options.guardrailActions));
  api.get('/guardrails', guardrailListRoute(options.guardrailSettings ?? (() => [])));
  // Unchecked without the settings, as on the admin API.
  const guardrails = guardrailNames(options.guardrailSettings);
  api.use(keyRoutes({ keys: options.keys, teams: options.teams, registry: options.registry, bodyLimitBytes: options.bodyLimitBytes, usage: adminUsageRoute(options.usage, options.keys), guardrails }));
  if (options.teams) api.use(teamRoutes({ keys: options.keys, teams: options.teams, bodyLimitBytes: options.bodyLimitBytes, guardrails }));
  return router;
}
