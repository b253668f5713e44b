import { ConfigError } from '../../config/gateway-config.ts';
import { sameWireFormat } from '../../core/formats/index.ts';
import type { ModelRegistry, ResolvedModel } from '../../core/model-registry.ts';
import type { RouteId, UpstreamRoute, UpstreamRouteId } from '../../plugins/plugin-contract.ts';

/** Canonical model ID → the canonical IDs tried, in order, when every endpoint of it failed. */
export type FallbackTable = ReadonlyMap<string, readonly string[]>;

const UPSTREAM_ROUTES: readonly UpstreamRouteId[] = ['chat-completions', 'messages', 'responses', 'count-tokens'];

/**
 * Whether two upstream routes serve a client route alike: in the same wire format, and both forwarded
 * or both adapted (an adapted vendor's answers take the adapted relay).
 */
function servedAlike(a: UpstreamRoute | undefined, b: UpstreamRoute | undefined): boolean {
  return sameWireFormat(a, b) && (a?.adapter === undefined) === (b?.adapter === undefined);
}

function upstreamRoutesOf(resolved: ResolvedModel): UpstreamRouteId[] {
  return UPSTREAM_ROUTES.filter((route) => resolved.model.routes.includes(route));
}

/** The model with this canonical ID on a route (whether the route spells it prefixed or native). */
function resolveCanonical(registry: ModelRegistry, route: RouteId, id: string): ResolvedModel | undefined {
  for (const spelling of [id, id.slice(id.indexOf('/') + 1)]) {
    try {
      const resolved = registry.resolve(route, spelling);
      if (resolved.canonicalId === id && !resolved.alias) return resolved;
    } catch {
      // not spelled so on this route
    }
  }
  return undefined;
}

function canonical(registry: ModelRegistry, id: string, what: string): ResolvedModel {
  for (const route of ['chat', ...UPSTREAM_ROUTES] as const) {
    const resolved = resolveCanonical(registry, route, id);
    if (resolved) return resolved;
  }
  throw new ConfigError(`fallbacks: ${what} '${id}' is not a canonical model ID (GET /v1/models lists them)`);
}

/**
 * The config's `fallbacks`, checked against the models loaded: every ID is a canonical model, no model
 * falls back to itself, and each target serves at least one of its source's routes in the same wire
 * format (a request on a route the target does not serve that way skips it).
 */
export function fallbackTable(
  registry: ModelRegistry,
  fallbacks: Readonly<Record<string, readonly string[]>>,
): FallbackTable {
  const table = new Map<string, readonly string[]>();
  for (const [source, targets] of Object.entries(fallbacks)) {
    const from = canonical(registry, source, 'model');
    for (const target of targets) {
      if (target === source) throw new ConfigError(`fallbacks: '${source}' cannot fall back to itself`);
      const to = canonical(registry, target, `fallback of '${source}'`);
      const shared = upstreamRoutesOf(from).filter(
        (route) => to.model.routes.includes(route) && servedAlike(to.plugin.routes[route], from.plugin.routes[route]),
      );
      if (shared.length === 0) {
        const alike = "in the same wire format (both forwarded, or both through a plugin's adapter)";
        throw new ConfigError(`fallbacks: '${target}' serves none of the routes of '${source}' ${alike}`);
      }
    }
    if (targets.length > 0) table.set(source, targets);
  }
  return table;
}

/**
 * The next fallback of a request's model on `route` at or after `index`: the target resolved, with
 * the client's requested ID kept; skipped are targets not serving the route in the requested model's
 * wire format and those `allowed` refuses (the caller's key may not use them, no endpoint configured).
 */
export function nextFallback(
  registry: ModelRegistry,
  targets: readonly string[],
  index: number,
  route: UpstreamRouteId,
  requested: ResolvedModel,
  allowed: (target: ResolvedModel) => boolean,
): { resolved: ResolvedModel; index: number } | undefined {
  const speaks = requested.plugin.routes[route];
  for (let at = index; at < targets.length; at++) {
    const resolved = resolveCanonical(registry, route, targets[at]!);
    if (!resolved || !servedAlike(resolved.plugin.routes[route], speaks) || !allowed(resolved)) continue;
    return { resolved: { ...resolved, requestedId: requested.requestedId }, index: at + 1 };
  }
  return undefined;
}
