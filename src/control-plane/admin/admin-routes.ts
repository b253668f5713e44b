import { Router, type RequestHandler } from 'express';
import { keyStatus, sameSecret, type ApiKeyRecord } from '../../core/api-keys.ts';
import type { FailedAuthThrottle } from '../../data-plane/auth/failed-auth-throttle.ts';
import { clientAddress } from '../../core/client-address.ts';
import type { KeyStore } from '../../stores/keys/key-store.ts';
import type { TeamStore } from '../../stores/teams/team-store.ts';
import { isTeamName } from '../../core/team-name.ts';
import { keyNotFound, routeNotFound, unauthenticated } from '../../core/gateway-errors.ts';
import { readJsonObject } from '../../data-plane/http/json-body.ts';
import type { RateSettings } from '../../core/limits.ts';
import type { ModelRegistry } from '../../core/model-registry.ts';
import { parseKeyChanges, parseNewKey, type NewKeyCheck } from './new-key-input.ts';
import { teamRoutes } from './team-routes.ts';
import { cacheRoutes } from './cache-routes.ts';
import type { ResponseCache } from '../../core/response-cache.ts';
import { limitsRoute } from '../limit-use.ts';
import type { LimitLedger } from '../../usage/limit-ledger.ts';
import type { GuardrailSettings } from '../../guardrails/guardrail-settings.ts';
import { guardrailListRoute, guardrailNames } from '../guardrail-list.ts';
import { guardrailActionsRoute } from '../guardrail-actions-route.ts';
import type { GuardrailActionLog } from '../../stores/guardrail-actions/guardrail-action-log.ts';

/** A key as the admin API shows it: never the hash (the key itself only once, on creation). */
export interface KeyView {
  readonly id: string;
  readonly name: string;
  readonly status: 'active' | 'revoked' | 'expired';
  readonly created_at: string;
  readonly expires_at: string | null;
  readonly revoked: boolean;
  readonly models: readonly string[] | null;
  readonly rpm: number | null;
  readonly concurrency: number | null;
  readonly quota: ApiKeyRecord['quota'] | null;
  readonly tpm: number | null;
  readonly budget: ApiKeyRecord['budget'] | null;
  /** The name of the key's team. */
  readonly team: string | null;
  /** The key's response cache setting as set; null when unset (the gateway's setting applies). */
  readonly cache: boolean | null;
  /** The guardrails the key's requests get; null when unset (its team's, else every configured one). */
  readonly guardrails: readonly string[] | null;
}

export function keyView(record: ApiKeyRecord): KeyView {
  return {
    id: record.id,
    name: record.name,
    status: keyStatus(record),
    created_at: record.createdAt,
    expires_at: record.expiresAt ?? null,
    revoked: record.revoked,
    models: record.models ?? null,
    rpm: record.rpm ?? null,
    concurrency: record.concurrency ?? null,
    quota: record.quota ?? null,
    tpm: record.tpm ?? null,
    budget: record.budget ?? null,
    team: record.team ?? null,
    cache: record.cache ?? null,
    guardrails: record.guardrails ?? null,
  };
}

/** The canonical model IDs (`vendor/model`) a key's `models` may name. */
export function canonicalModelIds(registry: ModelRegistry): Set<string> {
  return new Set(registry.plugins.flatMap((plugin) => plugin.models.map((model) => `${plugin.vendor}/${model.id}`)));
}

/**
 * Requires `Authorization: Bearer <admin token>`, compared in constant time. An address past its
 * failed attempts gets 429 before its token is even compared, so the token cannot be guessed faster.
 */
function requireAdminToken(token: string, throttle?: FailedAuthThrottle): RequestHandler {
  return function requireAdmin(req, _res, next) {
    const address = clientAddress(req);
    const refusal = throttle?.refusal(address);
    if (refusal) return next(refusal);
    const header = req.headers.authorization?.trim() ?? '';
    if (header === '') return next(unauthenticated('Missing admin token: send Authorization: Bearer <GATEWAY_ADMIN_TOKEN>'));
    const match = /^Bearer[ \t]+(\S+)$/i.exec(header);
    if (!match || !sameSecret(match[1]!, token)) return next(throttle?.failed(address) ?? unauthenticated('Invalid admin token'));
    next();
  };
}

export interface AdminRouterOptions {
  /** `GATEWAY_ADMIN_TOKEN`; without it every admin path answers 404. */
  readonly token: string | undefined;
  readonly keys: KeyStore;
  /** The teams keys may name (`/admin/teams`). */
  readonly teams: TeamStore;
  /** The current registry, to check that a key's `models` are canonical IDs; unchecked when absent. */
  readonly registry?: () => ModelRegistry;
  readonly bodyLimitBytes?: number;
  /** `GET /admin/usage`, when the usage module provides it. */
  readonly usage?: RequestHandler;
  /** Counts wrong admin tokens per client address (429 past the limit); a budget of its own, not the API keys'. */
  readonly throttle?: FailedAuthThrottle;
  /** Where `GET /admin/limits` reads request, token and money use; without it the limits are listed with no use figures. */
  readonly limits?: Pick<LimitLedger, 'peek'>;
  /** The request limit in force (`config.rateLimit`, read per request), for `GET /admin/limits`; the gateway's default when absent. */
  readonly rate?: () => RateSettings;
  /** The response cache `DELETE /admin/cache` empties; without one (no cache configured) it deletes nothing. */
  readonly responseCache?: ResponseCache;
  /**
   * The guardrails the configuration in force holds (`config.guardrails`, read per request): listed by
   * `GET /admin/guardrails`, and what `guardrails` of keys and teams are checked against; none listed and unchecked when absent.
   */
  readonly guardrailSettings?: () => readonly GuardrailSettings[];
  /** The newest guardrail actions, for `GET /admin/guardrails/actions`; that path answers 404 without it. */
  readonly guardrailActions?: Pick<GuardrailActionLog, 'recent'>;
}

/**
 * The admin API, mounted at `/admin`: `POST /keys` (201 with the key, shown once), `GET /keys`,
 * `PATCH /keys/:id` (its limits and settings; 409 when revoked), `DELETE /keys/:id` and `POST /keys/:id/revoke`, the teams (see {@link teamRoutes}), `GET /limits` (every
 * key's and team's limits and their use now, see {@link limitsRoute}), `DELETE /cache` (response cache
 * entries, see {@link cacheRoutes}), `GET /guardrails` (the configured guardrails, see {@link guardrailListRoute}) and `GET /guardrails/actions`
 * (the newest guardrail actions, see {@link guardrailActionsRoute}), behind the admin token. Without a token configured
 * the admin API does not exist (404).
 */
export function adminRouter(options: AdminRouterOptions): Router {
  const router = Router();
  if (!options.token) {
    router.use((req, _res, next) => next(routeNotFound(req.method, req.originalUrl.split('?')[0]!)));
    return router;
  }
  router.use(requireAdminToken(options.token, options.throttle));
  const guardrails = guardrailNames(options.guardrailSettings);
  router.use(keyRoutes({ ...options, guardrails }));
  router.use(teamRoutes({ ...options, guardrails }));
  router.get('/limits', limitsRoute(options));
  router.use(cacheRoutes(options));
  router.get('/guardrails', guardrailListRoute(options.guardrailSettings ?? (() => [])));
  if (options.guardrailActions) router.get('/guardrails/actions', guardrailActionsRoute(options.guardrailActions));
  return router;
}

/**
 * The key and usage operations behind whatever guard mounts them: the admin API (admin token) and the
 * account page (session cookie + CSRF token) answer alike. Without `teams`, a new key cannot name a team.
 */
export function keyRoutes(
  options: Omit<AdminRouterOptions, 'token' | 'teams'> & {
    readonly teams?: TeamStore;
    /** The names of the configured guardrails, to check a key's `guardrails` against; unchecked when absent. */
    readonly guardrails?: () => readonly string[];
  },
): Router {
  const router = Router();
  // What a key's body is checked against: the gateway's models, the team it names (looked up), the configured guardrails.
  const checksOf = async (body: Record<string, unknown>): Promise<NewKeyCheck> => {
    const team = body.team;
    const knownTeams = options.teams && new Set(isTeamName(team) && (await options.teams.get(team)) ? [team] : []);
    return { knownModels: options.registry && canonicalModelIds(options.registry()), knownTeams, knownGuardrails: options.guardrails?.() };
  };
  router.post('/keys', async (req, res) => {
    const body = await readJsonObject(req, options.bodyLimitBytes ?? 1024 * 1024);
    const input = parseNewKey(body, await checksOf(body));
    const { key, record } = await options.keys.create(input);
    res.status(201).json({ ...keyView(record), key });
  });
  // Each field set (an object replaces the whole limit), null to remove it, absent to keep it; 409 for a revoked key.
  router.patch('/keys/:id', async (req, res) => {
    const id = String(req.params.id);
    const body = await readJsonObject(req, options.bodyLimitBytes ?? 1024 * 1024);
    const record = await options.keys.update(id, parseKeyChanges(body, await checksOf(body)));
    if (!record) throw keyNotFound(id);
    res.json(keyView(record));
  });
  router.get('/keys', async (_req, res) => {
    res.json({ object: 'list', data: (await options.keys.list()).map(keyView) });
  });
  const revoke: RequestHandler = async (req, res) => {
    const id = String(req.params.id);
    if (!(await options.keys.revoke(id))) throw keyNotFound(id);
    res.json({ id, revoked: true });
  };
  router.delete('/keys/:id', revoke);
  router.post('/keys/:id/revoke', revoke);
  if (options.usage) router.get('/usage', options.usage);
  return router;
}
