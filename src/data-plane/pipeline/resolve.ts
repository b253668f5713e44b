import type { UsageAccounting } from '../../core/exchange.ts';
import { upstreamNotConfigured } from '../../core/gateway-errors.ts';
import type { ModelRegistry } from '../../core/model-registry.ts';
import type { UpstreamRouteId } from '../../plugins/plugin-contract.ts';
import { assertModelAllowed } from '../auth/authenticate.ts';
import type { ProviderEndpoints } from '../upstream/provider-endpoints.ts';
import { CompatibleCall } from '../routes/compatible-call.ts';
import type { FallbackTable } from '../routes/model-fallbacks.ts';
import type { RequestCheck } from '../routes/request-checks.ts';
import type { Stage } from './stage.ts';

/** What the resolve stage uses: the catalog and endpoints in force, the route's check of its body. */
export interface ResolveParts {
  readonly registry: () => ModelRegistry;
  readonly endpoints: ProviderEndpoints;
  readonly check: RequestCheck;
  /** On a route that forwards the client's body: the fallbacks and usage extractors its call reads. */
  readonly forward?: {
    readonly fallbacks: () => FallbackTable | undefined;
    readonly usage: Pick<UsageAccounting, 'extractor'>;
  };
}

/**
 * The resolve stage: the body checked (one 400 listing every bad field, the model included), the model
 * resolved (aliases to the newest concrete model), the caller's permission to use it, and the pool of
 * endpoints of its provider (a 502 saying what to set when there is none). On a forwarding route, the
 * call to forward: the client's bytes with the upstream's model in them.
 */
export function resolve(parts: ResolveParts): Stage {
  const { endpoints, forward } = parts;
  return async function resolve(exchange, next) {
    const registry = parts.registry();
    const body = exchange.body!.body;
    const resolved = parts.check(registry, body);
    assertModelAllowed(exchange.caller, resolved.canonicalId);
    const vendor = resolved.plugin.vendor;
    const pool = endpoints.pool(vendor);
    if (!pool) throw upstreamNotConfigured(vendor, endpoints.envPrefix(vendor));
    exchange.requested = exchange.model = resolved;
    exchange.pool = pool;
    if (forward) {
      const catalog = { registry, fallbacks: forward.fallbacks(), usage: forward.usage, served: (name: string) => endpoints.pool(name) !== undefined };
      exchange.call = new CompatibleCall(catalog, exchange.route.id as UpstreamRouteId, resolved, body.stream === true, () => exchange.body!);
    }
    return next(exchange);
  };
}
