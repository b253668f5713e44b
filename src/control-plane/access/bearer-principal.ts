import type { Request, RequestHandler } from 'express';
import { ADMIN_GRANT, type Principal } from '../../core/access.ts';
import { hashApiKey, sameSecret } from '../../core/api-keys.ts';
import { clientAddress } from '../../core/incoming-request.ts';
import { EVENTS, publish, type ChangeSite } from '../../core/diagnostics.ts';
import { unauthenticated, type GatewayError } from '../../core/gateway-errors.ts';
import type { FailedAuthThrottle } from '../../data-plane/pipeline/authenticate.ts';
import { looksLikeServiceToken, tokenStatus, type TokenStore } from '../../stores/tokens/token-store.ts';

/** The admin token's principal: the break-glass admin. */
export const ADMIN_TOKEN_PRINCIPAL: Principal = {
  actor: { kind: 'admin-token', id: 'admin-token' },
  grants: [ADMIN_GRANT],
};

export interface BearerOptions {
  /** `GATEWAY_ADMIN_TOKEN`; none: only service tokens sign in. */
  readonly adminToken: string | undefined;
  /** Whether the admin token is accepted now (`access.adminToken`, read per request); true when absent. */
  readonly adminTokenEnabled?: () => boolean;
  readonly tokens?: Pick<TokenStore, 'findByHash'>;
  /** Counts failed credentials per client address (429 past the limit), before any is compared. */
  readonly throttle?: FailedAuthThrottle;
  readonly source?: object;
  readonly now?: () => number;
}

/** Publishes a refused credential (no actor: no one could be told) for the audit log. */
export function refusedCredential(
  req: Request,
  source: object | undefined,
  via: ChangeSite['via'],
  reason: string,
): void {
  if (!source) return;
  publish(EVENTS.controlPlaneRefusal, () => ({
    source,
    via,
    address: clientAddress(req),
    at: Date.now(),
    action: 'authenticate',
    target: { type: 'route' as const, id: `${req.method} ${req.originalUrl.split('?')[0]}` },
    status: 401 as const,
    reason,
  }));
}

/**
 * Authenticates `Authorization: Bearer …` on the admin API: a service token (`gwt_…`, by its hash,
 * active) acts with its role; the admin token (compared in constant time, unless switched off) as admin.
 * An address past its failed attempts gets 429 before its credential is even compared.
 */
export function bearerPrincipal(options: BearerOptions): RequestHandler {
  const now = options.now ?? Date.now;
  return async function authenticateBearer(req, res, next) {
    const address = clientAddress(req);
    const refusal = options.throttle?.refusal(address);
    if (refusal) return next(refusal);
    // A wrong credential is counted and kept in the audit log; a missing one is neither (a client that forgot it).
    const fail = (error: GatewayError) => {
      refusedCredential(req, options.source, 'admin', error.detail);
      next(options.throttle?.failed(address) ?? error);
    };
    const header = req.headers.authorization?.trim() ?? '';
    if (header === '')
      return next(unauthenticated('Missing admin token: send Authorization: Bearer <GATEWAY_ADMIN_TOKEN>'));
    const value = /^Bearer[ \t]+(\S+)$/i.exec(header)?.[1];
    if (value && options.tokens && looksLikeServiceToken(value)) {
      const record = await options.tokens.findByHash(hashApiKey(value));
      if (!record || tokenStatus(record, now()) !== 'active')
        return fail(unauthenticated('Invalid, expired or revoked service token'));
      res.locals.principal = {
        actor: { kind: 'service-token', id: record.id, name: record.name },
        grants: [record.grant],
      } satisfies Principal;
      return next();
    }
    if (!value || !options.adminToken || !sameSecret(value, options.adminToken))
      return fail(unauthenticated('Invalid admin token'));
    if (options.adminTokenEnabled && !options.adminTokenEnabled()) {
      return fail(
        unauthenticated(
          'The admin token is switched off on this gateway (access.adminToken: false): use a service token',
        ),
      );
    }
    res.locals.principal = ADMIN_TOKEN_PRINCIPAL;
    next();
  };
}
