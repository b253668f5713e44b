import type { Request, RequestHandler, Response } from 'express';
import type { Principal } from '../../core/access.ts';
import { clientAddress } from '../../core/incoming-request.ts';
import type { ChangeSite, EventTarget } from '../../core/diagnostics.ts';
import type { KeyStore } from '../../stores/keys/key-store.ts';
import { covers, pathPattern, PERMISSIONS, scopeOf, type RouteRule } from './permissions.ts';
import { enterRequestScope, refused, type RequestScope } from './request-scope.ts';
import type { ListedRoute } from './route-list.ts';

/** The principal a request was authenticated as (set by the bearer check or the session). */
export function principalOf(res: Response): Principal {
  return res.locals.principal as Principal;
}

/** Stands for the gateway in events when none was given (a router built alone, in tests). */
const NO_SOURCE = Object.freeze({});

export interface AccessGateOptions {
  /** The declared routes and their permissions. */
  readonly rules: readonly RouteRule[];
  /** The routes the guarded router serves (read when a request matches no declared route). */
  readonly routes: () => readonly ListedRoute[];
  /** Finds the team of a key a route names (every key, whoever asks). */
  readonly keys: Pick<KeyStore, 'list'>;
  readonly via: ChangeSite['via'];
  readonly source?: object;
}

interface Matched {
  readonly rule: RouteRule;
  readonly params: readonly string[];
}

function match(
  rules: readonly { method: string; path: string }[],
  method: string,
  path: string,
): { index: number; params: string[] } | undefined {
  for (const [index, rule] of rules.entries()) {
    if (rule.method !== method) continue;
    const found = pathPattern(rule.path).exec(path);
    if (found) return { index, params: found.slice(1) };
  }
  return undefined;
}

/** The team a route's target belongs to: a name, null (no team: every team's, or unknown), or undefined (no target). */
async function targetOf(
  matched: Matched,
  req: Request,
  keys: Pick<KeyStore, 'list'>,
): Promise<EventTarget | undefined> {
  const keyTeam = async (id: string) => (await keys.list()).find((record) => record.id === id)?.team ?? null;
  const param = () => decodeURIComponent(matched.params[0]!);
  const query = req.query as Record<string, unknown>;
  switch (matched.rule.target) {
    case 'key': {
      const id = param();
      return { type: 'key', id, team: await keyTeam(id) };
    }
    case 'team':
      return { type: 'team', id: param(), team: param() };
    case 'usage':
      return typeof query.key_id === 'string'
        ? { type: 'key', id: query.key_id, team: await keyTeam(query.key_id) }
        : undefined;
    case 'cache':
      if (typeof query.team === 'string' && query.key_id === undefined)
        return { type: 'cache', id: `team:${query.team}`, team: query.team };
      if (typeof query.key_id === 'string' && query.team === undefined)
        return { type: 'cache', id: `key:${query.key_id}`, team: await keyTeam(query.key_id) };
      return { type: 'cache', id: '*', team: null };
    default:
      return undefined;
  }
}

/**
 * Deny by default: a request reaches the guarded routes only when its route is declared and the
 * principal holds the route's permission over the route's target (a key's team, a team, a cache
 * tenant). A route the router serves without a declaration is refused to everyone (403); a path no
 * route serves passes on to the 404. Every refusal is published (the audit log keeps it). The rest of
 * the request runs in its scope, which the access stores read.
 */
export function accessGate(options: AccessGateOptions): RequestHandler {
  return async function guardAccess(req, res, next) {
    const principal = principalOf(res);
    const scope: RequestScope = {
      principal,
      source: { source: options.source ?? NO_SOURCE, via: options.via, address: clientAddress(req) },
    };
    const method = req.method === 'HEAD' ? 'GET' : req.method;
    const declared = match(options.rules, method, req.path);
    if (!declared) {
      // Read now, not once: a route added after the first request is refused too.
      if (!match(options.routes(), method, req.path)) return next();
      const route = `${method} ${req.baseUrl}${req.path}`;
      return next(
        refused(
          scope,
          'route',
          { type: 'route', id: route },
          `No permission is declared for ${route}: it is refused to everyone`,
        ),
      );
    }
    const rule = options.rules[declared.index]!;
    let target: EventTarget | undefined;
    try {
      target = await targetOf({ rule, params: declared.params }, req, options.keys);
    } catch (error) {
      // A parameter that does not decode: Express answers it (400) as it does on every route.
      if (error instanceof URIError) return next();
      throw error;
    }
    const held = scopeOf(principal, rule.permission);
    const where = target?.team ? ` of team '${target.team}'` : target ? ' of every team' : '';
    const may = `Your role may not ${PERMISSIONS[rule.permission]}`;
    if (!held)
      return next(
        refused(
          scope,
          rule.permission,
          target ?? { type: 'route', id: `${method} ${req.baseUrl}${rule.path}` },
          `${may} (${rule.permission})`,
        ),
      );
    if (target && !covers(held, target.team))
      return next(refused(scope, rule.permission, target, `${may}${where} (${rule.permission})`));
    enterRequestScope(scope, res, () => next());
  };
}
