import { isRecord } from './known-fields.ts';
import type { AuthStyle } from './plugin-contract.ts';

/** The two named auth styles. */
const NAMED_STYLES: readonly string[] = ['bearer', 'x-api-key'];
/** Headers the gateway sets itself on every upstream request: no credential may take their place. */
const GATEWAY_HEADERS: readonly string[] = [
  'host',
  'content-type',
  'content-length',
  'accept',
  'connection',
  'transfer-encoding',
  'x-request-id',
];
/** Names that carry a credential whatever the route's auth: never a default header. */
const CREDENTIAL_NAMES: readonly string[] = ['authorization', 'x-api-key'];
const HEADER_NAME = /^[a-z0-9!#$%&'*+.^_`|~-]+$/;
const QUERY_NAME = /^[A-Za-z0-9._~-]+$/;
/**
 * Everything wrong with a route's `auth`, each as `[field suffix, problem]`; empty when it fits. A check
 * that needs an earlier one to pass (the header's name, once it is known to be a header credential) is
 * skipped when that one fails, so one mistake is one problem.
 */
export function authProblems(auth: unknown): [string, string][] {
  const expected =
    "must be 'bearer', 'x-api-key', { header: '<lower case name>', prefix?: '<text before the key>' } or { query: '<parameter>' }";
  if (typeof auth === 'string') return NAMED_STYLES.includes(auth) ? [] : [['', expected]];
  if (!isRecord(auth)) return [['', expected]];
  const problems: [string, string][] = Object.keys(auth)
    .filter((key) => !['header', 'prefix', 'query'].includes(key))
    .map((key) => [`.${key}`, `unknown field (${expected})`]);
  if ('header' in auth === 'query' in auth) {
    // Neither, beside an unknown field: that field is the mistake (a misspelled header or query), already named.
    if ('header' in auth || problems.length === 0)
      problems.push(['', `give exactly one of header or query (${expected})`]);
    return problems;
  }
  if ('query' in auth) {
    if ('prefix' in auth) problems.push(['.prefix', 'only a header credential takes a prefix']);
    if (!(typeof auth.query === 'string' && QUERY_NAME.test(auth.query)))
      problems.push(['.query', 'must be a query parameter name (letters, digits, . _ ~ -)']);
    return problems;
  }
  if (typeof auth.header !== 'string' || !HEADER_NAME.test(auth.header))
    problems.push(['.header', 'must be a lower case header name']);
  else if (GATEWAY_HEADERS.includes(auth.header))
    problems.push(['.header', `'${auth.header}' is set by the gateway itself; name the vendor's credential header`]);
  if (auth.prefix !== undefined && (typeof auth.prefix !== 'string' || /[\r\n\0]/.test(auth.prefix)))
    problems.push(['.prefix', 'must be text without line breaks']);
  return problems;
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
 * Without a valid `auth` (`undefined`), the two names that carry a credential whatever the route's auth.
 */
export function credentialHeaderNames(auth: AuthStyle | undefined): string[] {
  const declared = auth === undefined ? undefined : credentialHeader(auth);
  return declared && !CREDENTIAL_NAMES.includes(declared) ? [...CREDENTIAL_NAMES, declared] : [...CREDENTIAL_NAMES];
}
