import type { AuthStyle } from '../../plugins/plugin-contract.ts';

/** Where one request carries the endpoint's key: headers to set, and a query string part (`name=value`) to append. */
export interface UpstreamCredential {
  readonly headers: Readonly<Record<string, string>>;
  /** `<parameter>=<percent-encoded key>`, for a route that declares `{ query }`. */
  readonly query?: string;
}

const NONE: UpstreamCredential = { headers: {} };

/**
 * The credential of one upstream request, built from the route's declared `auth` and the key of the
 * endpoint the request goes to (never anything else, so a reloaded key or another endpoint's key is
 * what goes out, and what the relay redacts).
 */
export function upstreamCredential(auth: AuthStyle, apiKey: string | undefined): UpstreamCredential {
  if (!apiKey) return NONE;
  if (auth === 'bearer') return { headers: { authorization: `Bearer ${apiKey}` } };
  if (auth === 'x-api-key') return { headers: { 'x-api-key': apiKey } };
  if ('query' in auth) return { headers: {}, query: `${encodeURIComponent(auth.query)}=${encodeURIComponent(apiKey)}` };
  return { headers: { [auth.header]: `${auth.prefix ?? ''}${apiKey}` } };
}

/** A path with the credential's query part appended (after any query the path has). */
export function withCredentialQuery(path: string, credential: UpstreamCredential): string {
  return credential.query === undefined ? path : `${path}${path.includes('?') ? '&' : '?'}${credential.query}`;
}
