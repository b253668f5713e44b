import type { UsageAccounting } from '../../core/exchange.ts';
import { upstreamNotConfigured } from '../../core/gateway-errors.ts';
import type { ModelRegistry, ResolvedModel } from '../../core/model-registry.ts';
import type { UpstreamRouteId } from '../../plugins/plugin-contract.ts';
import { assertModelAllowed } from '../auth/authenticate.ts';
import type { ProviderEndpoints } from '../upstream/provider-endpoints.ts';
import { CompatibleCall, type CallCatalog } from '../routes/compatible-call.ts';
import type { JsonRequestBody } from '../http/json-body.ts';
import type { FallbackTable } from '../routes/model-fallbacks.ts';
import type { RequestCheck } from '../routes/request-checks.ts';
import type { Stage } from './stage.ts';

/** Makes a request's call on a forwarding route. */
type CallMaker = (
  catalog: CallCatalog,
  route: UpstreamRouteId,
  resolved: ResolvedModel,
  stream: boolean,
  client: () => JsonRequestBody,
) => CompatibleCall;

/** What the resolve stage uses: the catalog and endpoints in force, the route's check of its body. */
export interface ResolveParts {
  readonly registry: () => ModelRegistry;
  readonly endpoints: ProviderEndpoints;
  readonly check: RequestCheck;
  /** On a route that forwards the client's body: the fallbacks and usage extractors its call reads. */
  readonly forward?: {
    readonly fallbacks: () => FallbackTable | undefined;
    readonly usage: Pick<UsageAccounting, 'extractor'>;
    /** Makes the call, where it may be another than the forwarded one (a route some plugin adapts). */
    readonly call?: CallMaker;
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
      const catalog = {
        registry,
        fallbacks: forward.fallbacks(),
        usage: forward.usage,
        served: (name: string) => endpoints.pool(name) !== undefined,
      };
      const route = exchange.route.id as UpstreamRouteId;
      const client = () => exchange.body!;
      const stream = body.stream === true;
      exchange.call = forward.call
        ? forward.call(catalog, route, resolved, stream, client)
        : new CompatibleCall(catalog, route, resolved, stream, client);
    }
    return next(exchange);
  };
}
