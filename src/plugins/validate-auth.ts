import type { AuthStyle } from './plugin-contract.ts';

/** The two named auth styles. */
const NAMED_STYLES: readonly string[] = ['bearer', 'x-api-key'];
/** Headers the gateway sets itself on every upstream request: no credential may take their place. */
const GATEWAY_HEADERS: readonly string[] = ['host', 'content-type', 'content-length', 'accept', 'connection', 'transfer-encoding', 'x-request-id'];
/** Names that carry a credential whatever the route's auth: never a default header. */
const CREDENTIAL_NAMES: readonly string[] = ['authorization', 'x-api-key'];
const HEADER_NAME = /^[a-z0-9!#$%&'*+.^_`|~-]+$/;
const QUERY_NAME = /^[A-Za-z0-9._~-]+$/;
const isRecord = (value: unknown): value is Record<string, unknown> => typeof value === 'object' && value !== null && !Array.isArray(value);

/** What is wrong with a route's `auth`, as `[field suffix, problem]`, or `undefined` when it fits. */
export function authProblem(auth: unknown): [string, string] | undefined {
  const expected = "must be 'bearer', 'x-api-key', { header: '<lower case name>', prefix?: '<text before the key>' } or { query: '<parameter>' }";
  if (typeof auth === 'string') return NAMED_STYLES.includes(auth) ? undefined : ['', expected];
  if (!isRecord(auth)) return ['', expected];
  const keys = Object.keys(auth);
  const unknown = keys.find((key) => !['header', 'prefix', 'query'].includes(key));
  if (unknown) return [`.${unknown}`, `unknown field (${expected})`];
  if ('header' in auth === 'query' in auth) return ['', `give exactly one of header or query (${expected})`];
  if ('query' in auth) {
    if ('prefix' in auth) return ['.prefix', 'only a header credential takes a prefix'];
    return typeof auth.query === 'string' && QUERY_NAME.test(auth.query) ? undefined : ['.query', 'must be a query parameter name (letters, digits, . _ ~ -)'];
  }
  if (typeof auth.header !== 'string' || !HEADER_NAME.test(auth.header)) return ['.header', 'must be a lower case header name'];
  if (GATEWAY_HEADERS.includes(auth.header)) return ['.header', `'${auth.header}' is set by the gateway itself; name the vendor's credential header`];
  if (auth.prefix !== undefined && (typeof auth.prefix !== 'string' || /[\r\n\0]/.test(auth.prefix))) return ['.prefix', 'must be text without line breaks'];
  return undefined;
}

/** The header a valid `auth` puts the key in (lower case), or `undefined` for a query parameter. */
export function credentialHeader(auth: AuthStyle): string | undefined {
  if (auth === 'bearer') return 'authorization';
  if (auth === 'x-api-key') return 'x-api-key';
  return 'header' in auth ? auth.header : undefined;
}

/**
 * Header names a route may not send as a default or forward from the client: `authorization`,
 * `x-api-key` and the header of its declared credential. Only the declared credential goes upstream.
 */
export function credentialHeaderNames(auth: AuthStyle): string[] {
  const declared = credentialHeader(auth);
  return declared && !CREDENTIAL_NAMES.includes(declared) ? [...CREDENTIAL_NAMES, declared] : [...CREDENTIAL_NAMES];
}
