import { createHmac, randomBytes } from 'node:crypto';
import type { Request, RequestHandler, Response } from 'express';
import { MemoryStore, rateLimit, type Store } from 'express-rate-limit';
import { sameSecret } from '../../core/api-keys.ts';
import { fieldError, forbidden, rateLimited, unauthenticated, validationError } from '../../core/gateway-errors.ts';
import { readJsonObject } from '../../data-plane/http/json-body.ts';
import { describeWindow } from '../../data-plane/limits/rate-limiter.ts';
import type { AccountSession, SessionStore } from '../../stores/session-store.ts';
import { clientAddress } from '../../core/client-address.ts';

export const SESSION_COOKIE = 'gw_account_session';
export const CSRF_HEADER = 'x-csrf-token';
const COOKIE_PATH = '/account';
/** A sign-in body holds one token: anything bigger is refused before it is read. */
const SIGN_IN_BODY_LIMIT = 16 * 1024;

export interface AccountSessionOptions {
  /** `GATEWAY_ADMIN_TOKEN`: what signs in. Sessions made under another token are not found. */
  readonly token: string;
  readonly store: SessionStore;
  /** How long a session lasts from sign-in (8 hours by default). */
  readonly ttlMs?: number;
  /** Failed sign-ins allowed per client address and window (10 per 15 minutes by default). */
  readonly signInLimit?: { readonly max: number; readonly windowMs: number };
  /** Counters for failed sign-ins (process memory by default; the gateway shares them through Redis). */
  readonly signInStore?: Store;
  readonly now?: () => number;
}

/** The session a request is signed in with, once `requireSession` has passed it. */
export function sessionOf(res: Response): AccountSession {
  return res.locals.accountSession as AccountSession;
}

/** Whether the client reached the gateway over TLS, directly or through a proxy that says so. */
export function cameOverTls(req: Request): boolean {
  const forwarded = String(req.headers['x-forwarded-proto'] ?? '').split(',')[0]!.trim().toLowerCase();
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
export function accountSessions(options: AccountSessionOptions) {
  const ttlMs = options.ttlMs ?? 8 * 3_600_000;
  const now = options.now ?? Date.now;
  const limit = options.signInLimit ?? { max: 10, windowMs: 15 * 60_000 };
  const storeKey = (sessionId: string) => createHmac('sha256', options.token).update(sessionId).digest('hex');

  async function current(req: Request): Promise<{ id: string; session: AccountSession } | undefined> {
    const id = cookieValue(req, SESSION_COOKIE);
    if (!id || !/^[A-Za-z0-9_-]{43}$/.test(id)) return undefined;
    const session = await options.store.get(storeKey(id));
    return session && session.expiresAt > now() ? { id, session } : undefined;
  }

  function setCookie(req: Request, res: Response, value: string, maxAgeMs: number): void {
    res.cookie(SESSION_COOKIE, value, { httpOnly: true, sameSite: 'strict', secure: cameOverTls(req), path: COOKIE_PATH, maxAge: maxAgeMs });
  }

  const throttle = rateLimit({
    windowMs: limit.windowMs,
    limit: limit.max,
    skipSuccessfulRequests: true,
    store: options.signInStore ?? new MemoryStore(),
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

  const signIn: RequestHandler = async (req, res) => {
    const body = await readJsonObject(req, SIGN_IN_BODY_LIMIT);
    if (typeof body.token !== 'string' || body.token === '') throw validationError([fieldError('token', 'is required: the admin token (GATEWAY_ADMIN_TOKEN)')]);
    if (!sameSecret(body.token, options.token)) throw unauthenticated('Invalid admin token');
    const previous = await current(req);
    if (previous) await options.store.delete(storeKey(previous.id));
    const id = randomBytes(32).toString('base64url');
    const session: AccountSession = { csrfToken: randomBytes(32).toString('base64url'), expiresAt: now() + ttlMs };
    await options.store.put(storeKey(id), session);
    setCookie(req, res, id, ttlMs);
    res.status(201).json(sessionBody(session));
  };

  const state: RequestHandler = async (req, res) => {
    const found = await current(req);
    res.json(found ? sessionBody(found.session) : { enabled: true, signed_in: false });
  };

  const signOut: RequestHandler = async (req, res) => {
    const found = await current(req);
    if (found) await options.store.delete(storeKey(found.id));
    setCookie(req, res, '', 0);
    res.status(204).end();
  };

  /** Lets a request through only with a live session; a write also needs this origin and the CSRF token. */
  const requireSession: RequestHandler = async (req, res, next) => {
    const found = await current(req);
    if (!found) return next(unauthenticated('Not signed in (or the session expired): sign in on /account with the admin token'));
    res.locals.accountSession = found.session;
    if (req.method === 'GET' || req.method === 'HEAD') return next();
    sameOriginOnly(req, res, (error?: unknown) => {
      if (error) return next(error);
      if (!sameSecret(String(req.headers[CSRF_HEADER] ?? ''), found.session.csrfToken)) {
        return next(forbidden(`Missing or wrong CSRF token: send the session's csrf_token in the ${CSRF_HEADER} header`));
      }
      next();
    });
  };

  return { throttle, signIn, state, signOut, requireSession };
}

function sessionBody(session: AccountSession) {
  return { enabled: true, signed_in: true, csrf_token: session.csrfToken, expires_at: new Date(session.expiresAt).toISOString() };
}
