import type { Request, RequestHandler, Response } from 'express';
import type * as OpenIdClient from 'openid-client';
import type { Logger } from 'pino';
import { isLoopback, type OidcSettings } from '../../config/access-config.ts';
import type { AccountSession, SessionStore, SessionUser } from '../../stores/session-store.ts';
import { cameOverTls } from './account-sessions.ts';

export const SIGN_ON_COOKIE = 'gw_account_sso';
const SIGN_ON_PATH = '/account/api/sso';
/** How long a person may take at the identity provider. */
const PENDING_MS = 10 * 60_000;

/** Why a sign-on failed, as the page names it (`/account?sso_error=…`): a code, never the provider's text. */
export type SignOnFailure = 'expired' | 'denied' | 'failed' | 'unavailable' | 'no_role';

export interface SignOnOptions {
  /** The settings in force (read per sign-in). */
  readonly settings: () => OidcSettings | undefined;
  readonly store: SessionStore;
  /** The store's key for an id (an HMAC): the same as the sessions', under another prefix. */
  readonly storeKey: (id: string) => string;
  /** Starts the session of a person the provider vouched for (their groups give their roles). */
  readonly startSession: (req: Request, res: Response, user: SessionUser) => Promise<unknown>;
  /** Whether the groups give a role now; a person without one is refused and told so. */
  readonly hasRole: (req: Request, user: SessionUser) => boolean;
  readonly logger?: Logger;
  readonly now?: () => number;
}

function cookieValue(req: Request, name: string): string | undefined {
  for (const pair of (req.headers.cookie ?? '').split(';')) {
    const at = pair.indexOf('=');
    if (at > 0 && pair.slice(0, at).trim() === name) return pair.slice(at + 1).trim();
  }
  return undefined;
}

/** A groups claim as a list: an array of strings, or one string; anything else holds none. */
function groupsIn(claim: unknown): string[] | undefined {
  if (typeof claim === 'string') return [claim];
  if (Array.isArray(claim)) return claim.filter((group): group is string => typeof group === 'string');
  return undefined;
}

/**
 * Single sign-on with an OpenID Connect issuer: the authorization code flow with PKCE (S256), `state`
 * and `nonce`, the issuer's metadata and keys from its discovery document (openid-client checks the ID
 * token's signature, issuer, audience, expiry and nonce). `GET /sso` sends the browser to the issuer,
 * keeping what the answer must match under a short-lived cookie (SameSite=Lax: the answer is a
 * navigation from the issuer's site); `GET /sso/callback` exchanges the code, reads the groups (ID token,
 * else userinfo), and starts a session when they give a role. Failures return to `/account?sso_error=…`.
 */
export function singleSignOn(options: SignOnOptions): { start: RequestHandler; callback: RequestHandler } {
  const flow: SignOnFlow = {
    options,
    now: options.now ?? Date.now,
    configuration: issuerDiscovery(),
    fail(res, why, detail) {
      if (detail) options.logger?.warn({ reason: why, detail }, `single sign-on failed: ${why}`);
      res.redirect(303, `/account?sso_error=${why}`);
    },
  };
  return { start: signOnStart(flow), callback: signOnCallback(flow) };
}

/** What both halves of the flow share: the options, the clock, the issuer's configuration, the way back on failure. */
interface SignOnFlow {
  readonly options: SignOnOptions;
  readonly now: () => number;
  readonly configuration: (settings: OidcSettings) => Promise<OpenIdClient.Configuration>;
  readonly fail: (res: Response, why: SignOnFailure, detail?: string) => void;
}

/** `GET /sso`: keeps what the issuer's answer must match (its id in a cookie), then sends the browser to the issuer. */
function signOnStart({ options, now, configuration, fail }: SignOnFlow): RequestHandler {
  return async (req, res) => {
    const settings = options.settings();
    if (!settings) return fail(res, 'unavailable', 'single sign-on is not configured');
    let config: OpenIdClient.Configuration;
    try {
      config = await configuration(settings);
    } catch (error) {
      return fail(res, 'unavailable', `the issuer's discovery document could not be read: ${(error as Error).message}`);
    }
    const pending = newPending(req, settings);
    const id = oidc.randomState();
    await options.store.put(options.storeKey(`sso:${id}`), { csrfToken: '', expiresAt: now() + PENDING_MS, pending });
    res.cookie(SIGN_ON_COOKIE, id, {
      httpOnly: true,
      sameSite: 'lax',
      secure: cameOverTls(req),
      path: SIGN_ON_PATH,
      maxAge: PENDING_MS,
    });
    res.redirect(303, (await authorizationUrl(config, settings, pending)).href);
  };
}

/** A new sign-on's `state`, `nonce` and PKCE verifier, and where the issuer sends the browser back. */
function newPending(req: Request, settings: OidcSettings): NonNullable<AccountSession['pending']> {
  const redirectUri =
    settings.redirectUri ?? `${cameOverTls(req) ? 'https' : 'http'}://${req.headers.host}${SIGN_ON_PATH}/callback`;
  return {
    state: oidc.randomState(),
    nonce: oidc.randomNonce(),
    verifier: oidc.randomPKCECodeVerifier(),
    redirectUri,
  };
}

/** `GET /sso/callback`: the issuer's answer checked against the pending sign-on; a session when it gives a role. */
function signOnCallback({ options, configuration, fail }: SignOnFlow): RequestHandler {
  return async (req, res) => {
    const pending = await takePending(options, req, res);
    if (!pending) return fail(res, 'expired');
    if (typeof req.query.error === 'string') return fail(res, 'denied', `the issuer answered ${req.query.error}`);
    const settings = options.settings();
    if (!settings) return fail(res, 'unavailable', 'single sign-on is not configured');
    let user: SessionUser;
    try {
      user = await signedInUser(await configuration(settings), settings, pending, req.originalUrl);
    } catch (error) {
      return fail(res, 'failed', (error as Error).message);
    }
    if (!options.hasRole(req, user)) return fail(res, 'no_role');
    await options.startSession(req, res, user);
    res.redirect(303, '/account');
  };
}

/** The pending sign-on the request's cookie names, taken from the store (it answers once); the cookie is cleared. */
async function takePending(
  options: SignOnOptions,
  req: Request,
  res: Response,
): Promise<AccountSession['pending'] | undefined> {
  const id = cookieValue(req, SIGN_ON_COOKIE);
  res.clearCookie(SIGN_ON_COOKIE, { httpOnly: true, sameSite: 'lax', secure: cameOverTls(req), path: SIGN_ON_PATH });
  const entry =
    id && /^[A-Za-z0-9_-]{1,128}$/.test(id) ? await options.store.get(options.storeKey(`sso:${id}`)) : undefined;
  if (id && entry) await options.store.delete(options.storeKey(`sso:${id}`));
  return entry?.pending;
}

/** Where the browser signs in: the issuer's authorization endpoint with the PKCE challenge, `state` and `nonce`. */
async function authorizationUrl(
  config: OpenIdClient.Configuration,
  settings: OidcSettings,
  pending: NonNullable<AccountSession['pending']>,
): Promise<URL> {
  return oidc.buildAuthorizationUrl(config, {
    redirect_uri: pending.redirectUri,
    scope: ['openid', ...settings.scopes].join(' '),
    code_challenge: await oidc.calculatePKCECodeChallenge(pending.verifier),
    code_challenge_method: 'S256',
    state: pending.state,
    nonce: pending.nonce,
  });
}

/**
 * openid-client (and the JOSE library under it), loaded with the first sign-on: a gateway without
 * single sign-on never holds them. Every use below follows the issuer's discovery, which awaits it.
 */
let oidc: typeof OpenIdClient;
let loading: Promise<typeof OpenIdClient> | undefined;
const openIdClient = (): Promise<typeof OpenIdClient> =>
  (loading ??= import('openid-client').then((client) => (oidc = client)));

/** The issuer's configuration, discovered once per settings (again after a failure or a reload that changes them). */
function issuerDiscovery(): (settings: OidcSettings) => Promise<OpenIdClient.Configuration> {
  let discovered: { key: string; config: Promise<OpenIdClient.Configuration> } | undefined;
  return (settings) => {
    const key = JSON.stringify([settings.issuer, settings.clientId, settings.clientSecret]);
    if (discovered?.key !== key) {
      const issuer = new URL(settings.issuer);
      const insecure = issuer.protocol === 'http:' && isLoopback(issuer.hostname);
      const config = openIdClient().then((client) => {
        const execute = insecure ? [client.allowInsecureRequests] : [];
        return client.discovery(issuer, settings.clientId, settings.clientSecret, undefined, { execute, timeout: 10 });
      });
      discovered = { key, config };
      config.catch(() => {
        if (discovered?.config === config) discovered = undefined;
      });
    }
    return discovered.config;
  };
}

/**
 * The person the issuer's answer signs in: the code exchanged (state, nonce and PKCE checked), the ID
 * token's claims, the groups from its claim, else from userinfo.
 */
async function signedInUser(
  config: OpenIdClient.Configuration,
  settings: OidcSettings,
  pending: NonNullable<AccountSession['pending']>,
  originalUrl: string,
): Promise<SessionUser> {
  const answered = new URL(pending.redirectUri);
  answered.search = new URL(originalUrl, 'http://callback').search;
  const checks = {
    pkceCodeVerifier: pending.verifier,
    expectedState: pending.state,
    expectedNonce: pending.nonce,
    idTokenExpected: true,
  };
  const tokens = await oidc.authorizationCodeGrant(config, answered, checks);
  const claims = tokens.claims()!;
  let groups = groupsIn(claims[settings.groupsClaim]);
  let profile: Record<string, unknown> = claims;
  if (groups === undefined) {
    profile = await oidc.fetchUserInfo(config, tokens.access_token, claims.sub);
    groups = groupsIn(profile[settings.groupsClaim]) ?? [];
  }
  const text = (name: string) =>
    typeof profile[name] === 'string'
      ? (profile[name] as string)
      : typeof claims[name] === 'string'
        ? (claims[name] as string)
        : undefined;
  return { issuer: claims.iss, subject: claims.sub, name: text('name'), email: text('email'), groups };
}
