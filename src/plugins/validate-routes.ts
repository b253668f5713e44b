import { closestName, KNOWN_FIELDS, isRecord } from './known-fields.ts';
import type { AuthStyle, RouteId, UpstreamRouteId } from './plugin-contract.ts';
import type { DeclarationProblems } from './declaration-problems.ts';
import { adapterProblems } from './validate-adapter.ts';
import { authProblems, credentialHeaderNames } from './validate-auth.ts';

export const ROUTE_IDS: readonly RouteId[] = ['chat', 'chat-completions', 'messages', 'count-tokens', 'responses'];
const UPSTREAM_ROUTE_IDS: readonly string[] = ROUTE_IDS.filter((route) => route !== 'chat');
const WIRE_FORMATS: readonly string[] = ['chat-completions', 'responses', 'messages', 'count-tokens'];
const ID_FORMS: readonly string[] = ['prefixed', 'native'];

/**
 * The wire formats each upstream route key may speak (today one each, the route's own): a route's `format` must be one
 * of them.
 */
const FORMATS_OF_ROUTE: Readonly<Record<UpstreamRouteId, readonly string[]>> = {
  'chat-completions': ['chat-completions'],
  messages: ['messages'],
  'count-tokens': ['count-tokens'],
  responses: ['responses'],
};

/** Whether `route` names a route the plugin declares; `undefined` when that cannot be told (`routes` is refused). */
export type DeclaresRoute = (route: unknown) => boolean | undefined;

/**
 * Checks the plugin's `routes`, each route whole, and tells which routes they declare, for the checks of fields
 * that name one. A misspelled route key stands for the route it was meant to be, so that what names that route
 * is not refused a second time for it.
 */
export function checkRoutes(problems: DeclarationProblems, routes: unknown): DeclaresRoute {
  if (!isRecord(routes)) {
    problems.add('routes', 'must be an object keyed by route');
    return () => undefined;
  }
  const declared = new Set(Object.keys(routes));
  for (const [routeId, route] of Object.entries(routes)) {
    const meant = checkRouteKey(problems, routeId);
    if (meant) declared.add(meant);
    checkRoute(problems, routeId, route);
  }
  return (route) => typeof route === 'string' && declared.has(route);
}

/** Refuses a route key that names no upstream route; the route it was meant to be, when it is a misspelling of one. */
function checkRouteKey(problems: DeclarationProblems, routeId: string): string | undefined {
  if (UPSTREAM_ROUTE_IDS.includes(routeId)) return undefined;
  const meant = closestName(routeId, UPSTREAM_ROUTE_IDS);
  problems.add(
    `routes.${routeId}`,
    meant ? `unknown route: did you mean '${meant}'?` : `unknown route (known: ${UPSTREAM_ROUTE_IDS.join(', ')})`,
  );
  return meant;
}

function checkRoute(problems: DeclarationProblems, routeId: string, route: unknown): void {
  const field = `routes.${routeId}`;
  if (!isRecord(route)) {
    problems.add(field, 'must be an object');
    return;
  }
  problems.refuseUnknownFields(route, KNOWN_FIELDS.route, field);
  if (typeof route.path !== 'string' || !route.path.startsWith('/'))
    problems.add(`${field}.path`, "must be a path starting with '/'");
  checkFormat(problems, field, routeId, route.format);
  const credentialNames = checkAuth(problems, field, route.auth);
  if (
    route.modelIds !== undefined &&
    (!Array.isArray(route.modelIds) ||
      route.modelIds.length === 0 ||
      route.modelIds.some((form) => !ID_FORMS.includes(form)))
  ) {
    problems.add(`${field}.modelIds`, `must be a non-empty list of ${ID_FORMS.join(', ')}`);
  }
  checkForwardHeaders(problems, field, route.forwardHeaders, credentialNames);
  checkDefaultHeaders(problems, field, route.defaultHeaders, credentialNames);
  if (route.adapter !== undefined) {
    for (const [suffix, problem] of adapterProblems(route.adapter, routeId))
      problems.add(`${field}.adapter${suffix}`, problem);
  }
}

/** Refuses a `format` that is no wire format, or one the route key does not speak. */
function checkFormat(problems: DeclarationProblems, field: string, routeId: string, format: unknown): void {
  if (!WIRE_FORMATS.includes(format as string)) {
    problems.add(`${field}.format`, `must be one of ${WIRE_FORMATS.join(', ')}`);
    return;
  }
  if (!UPSTREAM_ROUTE_IDS.includes(routeId)) return;
  const spoken = FORMATS_OF_ROUTE[routeId as UpstreamRouteId];
  if (spoken.includes(format as string)) return;
  const keyFormat = spoken.join("' or '");
  problems.add(
    `${field}.format`,
    `is '${String(format)}', but the route '${routeId}' speaks '${keyFormat}': declare format '${keyFormat}', or declare this upstream under routes.${String(format)}`,
  );
}

/**
 * Refuses a bad `auth`; the header names that carry the credential on this route. With a bad auth, the names that
 * carry a credential whatever the auth are still checked.
 */
function checkAuth(problems: DeclarationProblems, field: string, auth: unknown): readonly string[] {
  const badAuth = authProblems(auth);
  for (const [suffix, problem] of badAuth) problems.add(`${field}.auth${suffix}`, problem);
  return credentialHeaderNames(badAuth.length ? undefined : (auth as AuthStyle));
}

/** Refuses `forwardHeaders` that are not lower case header names, or that name a credential header. */
function checkForwardHeaders(
  problems: DeclarationProblems,
  field: string,
  headers: unknown,
  credentialNames: readonly string[],
): void {
  if (headers === undefined) return;
  if (
    !Array.isArray(headers) ||
    headers.some((header) => typeof header !== 'string' || header !== header.toLowerCase())
  ) {
    problems.add(`${field}.forwardHeaders`, 'must be a list of lower case header names');
  } else if (headers.some((header) => credentialNames.includes(header))) {
    problems.add(
      `${field}.forwardHeaders`,
      `must not name ${credentialNames.join(' or ')}: the client's gateway key never goes upstream, only the declared credential does`,
    );
  }
}

/** Refuses `defaultHeaders` that do not map names to strings, or that set a credential header. */
function checkDefaultHeaders(
  problems: DeclarationProblems,
  field: string,
  headers: unknown,
  credentialNames: readonly string[],
): void {
  if (headers === undefined) return;
  if (!isRecord(headers) || Object.values(headers).some((v) => typeof v !== 'string')) {
    problems.add(`${field}.defaultHeaders`, 'must map header names to strings');
    return;
  }
  const credentialDefault = Object.keys(headers).find((header) => credentialNames.includes(header.toLowerCase()));
  if (credentialDefault) {
    problems.add(
      `${field}.defaultHeaders`,
      `must not set '${credentialDefault}': credentials come from the endpoint's configured key, sent as the route's auth declares`,
    );
  }
}
