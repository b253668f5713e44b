import { createHmac, randomBytes } from 'node:crypto';
import { describeWindow } from '../../usage/limit-meters.ts';
import type { Request, RequestHandler, Response } from 'express';
import { MemoryStore, rateLimit, type Store } from 'express-rate-limit';
import { sameSecret } from '../../core/api-keys.ts';
import { actorOf, grantsOfGroups, type Principal, type RoleMapping } from '../../core/access.ts';
import { EVENTS, publish } from '../../core/diagnostics.ts';
import {
  fieldError,
  forbidden,
  rateLimited,
  unauthenticated,
  validationError,
  type GatewayError,
} from '../../core/gateway-errors.ts';
import { readJsonObject } from '../../data-plane/http/json-body.ts';

import type { AccountSession, SessionStore, SessionUser } from '../../stores/session-store.ts';
import { ADMIN_TOKEN_PRINCIPAL } from '../access/bearer-principal.ts';
import { PERMISSIONS, scopeOf, type Permission } from '../access/permissions.ts';
import { clientAddress } from '../../core/incoming-request.ts';

export const SESSION_COOKIE = 'gw_account_session';
export const CSRF_HEADER = 'x-csrf-token';
const COOKIE_PATH = '/account';
/** A sign-in body holds one token: anything bigger is refused before it is read. */
const SIGN_IN_BODY_LIMIT = 16 * 1024;

export interface AccountSessionOptions {
  /** `GATEWAY_ADMIN_TOKEN`: what signs in with `POST /session`; none: single sign-on only. */
  readonly token: string | undefined;
  /** Whether the admin token signs in now (`access.adminToken`, read per request); true when absent. */
  readonly adminTokenEnabled?: () => boolean;
  /**
   * Keys the store's HMAC of session ids: the admin token when set (rotating it ends every session),
   * else the single sign-on client's secret or id. Sessions made under another secret are not found.
   */
  readonly secret: string;
  /** The role mapping in force (read per request): a signed-in person's roles come from their groups. */
  readonly roles?: () => readonly RoleMapping[];
  /** Names this gateway in the events it publishes (sign-ins, refusals). */
  readonly source?: object;
  readonly store: SessionStore;
  /** How long a session lasts from sign-in (8 hours by default). */
  readonly ttlMs?: number;
  /** Failed sign-ins allowed per client address and window (10 per 15 minutes by default). */
  readonly signInLimit?: { readonly max: number; readonly windowMs: number };
  /** Counters for failed sign-ins (process memory by default; the gateway shares them through Redis). */
  readonly signInStore?: Store;
  readonly now?: () => number;
  /** Single sign-on is configured: the signed-out state says where it starts. */
  readonly signOn?: boolean;
}

/** The session a request is signed in with, once `requireSession` has passed it. */
export function sessionOf(res: Response): AccountSession {
  return res.locals.accountSession as AccountSession;
}

/** Whether the client reached the gateway over TLS, directly or through a proxy that says so. */
export function cameOverTls(req: Request): boolean {
  const forwarded = String(req.headers['x-forwarded-proto'] ?? '')
    .split(',')[0]!
    .trim()
    .toLowerCase();
  return req.secure || forwarded === 'https';
}

function cookieValue(req: Request, name: string): string | undefined {
  for (const pair of (req.headers.cookie ?? '').split(';')) {
    const at = pair.indexOf('=');
    if (at > 0 && pair.slice(0, at).trim() === name) return pair.slice(at + 1).trim();
  }
  return undefined;
}

/**
 * Refuses a write another site could have sent: when the browser says where the request comes from
 * (`Origin`, `Sec-Fetch-Site`), it must be this origin. The CSRF token is checked on top of this.
 */
export const sameOriginOnly: RequestHandler = function sameOriginOnly(req, _res, next) {
  const site = req.headers['sec-fetch-site'];
  if (site !== undefined && site !== 'same-origin') return next(forbidden('Cross-site request refused'));
  const origin = req.headers.origin;
  if (origin !== undefined && origin !== `${cameOverTls(req) ? 'https' : 'http'}://${req.headers.host ?? ''}`) {
    return next(forbidden('Cross-site request refused: Origin does not match this gateway'));
  }
  next();
};

/**
 * Sign-in, sign-out and the session guard of the account page. The admin token is exchanged for a
 * random session id in an HttpOnly, SameSite=Strict cookie (Secure over TLS); writes also need the
 * session's CSRF token in `x-csrf-token`.
 */
export function accountSessions(options: AccountSessionOptions): AccountSessions {
  return new AccountSessions(options);
}

/** The account page's sessions: its handlers, bound, to mount on the account router. */
export class AccountSessions {
  private readonly ttlMs: number;
  private readonly now: () => number;
  /** Failed sign-ins per client address (in the shared store when one is given). */
  readonly throttle: RequestHandler;

  constructor(private readonly options: AccountSessionOptions) {
    this.ttlMs = options.ttlMs ?? 8 * 3_600_000;
    this.now = options.now ?? Date.now;
    this.throttle = signInThrottle(options.signInLimit ?? { max: 10, windowMs: 15 * 60_000 }, options.signInStore);
  }

  /** Where a session is kept: an HMAC of its id, so the store never holds a usable session id. */
  readonly storeKey = (sessionId: string) => createHmac('sha256', this.options.secret).update(sessionId).digest('hex');

  private adminTokenOn(): boolean {
    return this.options.token !== undefined && (this.options.adminTokenEnabled?.() ?? true);
  }

  /** Where and when an event of the page happens (each call: its own time). */
  private site(req: Request) {
    const source = this.options.source ?? NO_SOURCE;
    return { source, via: 'account' as const, address: clientAddress(req), at: Date.now() };
  }

  /** A sign-in refused: published as a refusal (the audit log) and given back to throw. */
  private refuse(req: Request, error: GatewayError, actor?: Principal): GatewayError {
    if (this.options.source) {
      const target = { type: 'session' as const, id: actor?.actor.kind === 'user' ? 'oidc' : 'admin-token' };
      const status = error.status as 401 | 403;
      publish(EVENTS.controlPlaneRefusal, () => ({
        ...this.site(req),
        actor: actor && actorOf(actor),
        action: 'session.sign-in',
        target,
        status,
        reason: error.detail,
      }));
    }
    return error;
  }

  /** A sign-in or sign-out, published (the audit log). */
  private signedIn(
    req: Request,
    principal: Principal,
    action: 'session.sign-in' | 'session.sign-out',
    session: AccountSession,
  ): void {
    if (!this.options.source) return;
    const method = session.user ? ('oidc' as const) : ('admin-token' as const);
    publish(EVENTS.signIn, () => ({ ...this.site(req), actor: actorOf(principal), action, method }));
  }

  /** The principal a session acts as now: its person's roles from the mapping in force, or the admin token's. */
  private principalOf(session: AccountSession): Principal | GatewayError {
    if (!session.user) {
      if (this.adminTokenOn()) return ADMIN_TOKEN_PRINCIPAL;
      return unauthenticated(
        'Signing in with the admin token is switched off on this gateway: sign in again with single sign-on',
      );
    }
    const grants = grantsOfGroups(this.options.roles?.() ?? [], session.user.groups);
    const principal = userPrincipal(session.user, grants);
    if (grants.length > 0) return principal;
    return forbidden(
      `${principal.actor.name ?? principal.actor.id} holds no role on this gateway (none of their groups is in the role mapping)`,
    );
  }

  private async current(req: Request): Promise<{ id: string; session: AccountSession } | undefined> {
    const id = cookieValue(req, SESSION_COOKIE);
    if (!id || !/^[A-Za-z0-9_-]{43}$/.test(id)) return undefined;
    const session = await this.options.store.get(this.storeKey(id));
    return session && !session.pending && session.expiresAt > this.now() ? { id, session } : undefined;
  }

  private setCookie(req: Request, res: Response, value: string, maxAgeMs: number): void {
    res.cookie(SESSION_COOKIE, value, {
      httpOnly: true,
      sameSite: 'strict',
      secure: cameOverTls(req),
      path: COOKIE_PATH,
      maxAge: maxAgeMs,
    });
  }

  /**
   * Starts a session for a principal (the admin token's, or a person's from single sign-on), replacing the request's
   * own.
   */
  readonly startSession = async (req: Request, res: Response, user?: SessionUser): Promise<AccountSession> => {
    const previous = await this.current(req);
    if (previous) await this.options.store.delete(this.storeKey(previous.id));
    const id = randomBytes(32).toString('base64url');
    const session: AccountSession = {
      csrfToken: randomBytes(32).toString('base64url'),
      expiresAt: this.now() + this.ttlMs,
      ...(user && { user }),
    };
    await this.options.store.put(this.storeKey(id), session);
    this.setCookie(req, res, id, this.ttlMs);
    this.signedIn(req, this.principalOf(session) as Principal, 'session.sign-in', session);
    return session;
  };

  readonly signIn: RequestHandler = async (req, res) => {
    const body = await readJsonObject(req, SIGN_IN_BODY_LIMIT);
    if (typeof body.token !== 'string' || body.token === '')
      throw validationError([fieldError('token', 'is required: the admin token (GATEWAY_ADMIN_TOKEN)')]);
    const { token } = this.options;
    if (token === undefined || !sameSecret(body.token, token))
      throw this.refuse(req, unauthenticated('Invalid admin token'));
    if (!this.adminTokenOn()) {
      throw this.refuse(
        req,
        unauthenticated(
          'Signing in with the admin token is switched off on this gateway (access.adminToken: false): use single sign-on',
        ),
      );
    }
    const session = await this.startSession(req, res);
    res.status(201).json(sessionBody(session, ADMIN_TOKEN_PRINCIPAL));
  };

  readonly state: RequestHandler = async (req, res) => {
    const found = await this.current(req);
    const principal = found && this.principalOf(found.session);
    if (found && principal && !(principal instanceof Error))
      return void res.json(sessionBody(found.session, principal));
    res.json({ enabled: true, signed_in: false, ...this.signInMethods() });
  };

  /** How one may sign in, when it is not the default (the admin token only). */
  private signInMethods(): Record<string, unknown> {
    return {
      ...(this.options.signOn && { sso: { start: '/account/api/sso' } }),
      ...(!this.adminTokenOn() && { admin_token: false }),
    };
  }

  readonly signOut: RequestHandler = async (req, res) => {
    const found = await this.current(req);
    if (found) {
      await this.options.store.delete(this.storeKey(found.id));
      const principal = this.principalOf(found.session);
      if (!(principal instanceof Error)) this.signedIn(req, principal, 'session.sign-out', found.session);
    }
    this.setCookie(req, res, '', 0);
    res.status(204).end();
  };

  /** Lets a request through only with a live session; a write also needs this origin and the CSRF token. */
  readonly requireSession: RequestHandler = async (req, res, next) => {
    const found = await this.current(req);
    if (!found) return next(unauthenticated('Not signed in (or the session expired): sign in on /account'));
    const principal = this.principalOf(found.session);
    if (principal instanceof Error) return next(principal);
    res.locals.principal = principal;
    res.locals.accountSession = found.session;
    if (req.method === 'GET' || req.method === 'HEAD') return next();
    sameOriginOnly(req, res, (error?: unknown) => {
      if (error) return next(error);
      if (!sameSecret(String(req.headers[CSRF_HEADER] ?? ''), found.session.csrfToken)) {
        return next(
          forbidden(`Missing or wrong CSRF token: send the session's csrf_token in the ${CSRF_HEADER} header`),
        );
      }
      next();
    });
  };

  /** Whether a person's groups give a role now; a refusal (403) is published when they do not. */
  readonly hasRole = (req: Request, user: SessionUser): boolean => {
    const principal = this.principalOf({ csrfToken: '', expiresAt: 0, user });
    if (!(principal instanceof Error)) return true;
    this.refuse(req, principal, userPrincipal(user, []));
    return false;
  };
}

/** Failed sign-ins per client address: past the limit, 429 until the window ends (successful ones are not counted). */
function signInThrottle(
  limit: { readonly max: number; readonly windowMs: number },
  store: AccountSessionOptions['signInStore'],
): RequestHandler {
  return rateLimit({
    windowMs: limit.windowMs,
    limit: limit.max,
    skipSuccessfulRequests: true,
    store: store ?? new MemoryStore(),
    passOnStoreError: true,
    standardHeaders: 'draft-8',
    legacyHeaders: false,
    validate: { keyGeneratorIpFallback: false, ip: false, trustProxy: false, xForwardedForHeader: false },
    keyGenerator: (req) => clientAddress(req),
    handler: (_req, res, next) => {
      const retryAfter = res.getHeader('retry-after');
      next(
        rateLimited(
          `Too many failed sign-ins from this address: ${limit.max} per ${describeWindow(limit.windowMs)}; wait and retry`,
          retryAfter === undefined ? undefined : { 'Retry-After': String(retryAfter) },
        ),
      );
    },
  });
}

/** Stands for the gateway in events when none was given (a router built alone, in tests). */
const NO_SOURCE = Object.freeze({});

/**
 * A person's principal: their subject at the issuer, named by e-mail (else name), with the grants their groups give.
 */
export function userPrincipal(user: SessionUser, grants: Principal['grants']): Principal {
  return {
    actor: { kind: 'user', id: `${user.issuer}#${user.subject}`, name: user.email ?? user.name ?? user.subject },
    grants,
  };
}

/** What the page learns of its session: who is signed in, the roles, and where each permission is held. */
function sessionBody(session: AccountSession, principal: Principal) {
  const permissions: Record<string, 'all' | string[]> = {};
  for (const permission of Object.keys(PERMISSIONS) as Permission[]) {
    const scope = permission === 'public' ? undefined : scopeOf(principal, permission);
    if (scope) permissions[permission] = scope === 'all' ? 'all' : [...scope].sort();
  }
  const actor = actorOf(principal);
  return {
    enabled: true,
    signed_in: true,
    csrf_token: session.csrfToken,
    expires_at: new Date(session.expiresAt).toISOString(),
    actor: { kind: actor.kind, id: actor.id, name: actor.name ?? null },
    roles: actor.roles,
    permissions,
  };
}
