import type { ModelRegistry } from '../plugins/model-registry.ts';
import type { ProviderEndpoints } from '../routes/route-services.ts';

/** One provider's upstream as the health view lists it. */
export interface ProviderHealth {
  readonly vendor: string;
  /** What an operator sets: `<PREFIX>_BASE_URL`, `<PREFIX>_API_KEY`. */
  readonly env_prefix: string;
  /** Origin and version prefix of the upstream; never its credential. Null when unconfigured. */
  readonly endpoint: string | null;
  /**
   * What is known of the endpoint today: `configured` or `not configured`. Later states (a circuit
   * breaker's `open`, …) are further values of this one field, so the page's column needs no change.
   */
  readonly status: string;
}

export interface AliasEntry {
  readonly alias: string;
  readonly vendor: string;
  /** The canonical model the alias resolves to now (config overrides applied). */
  readonly target: string;
  readonly routes: readonly string[];
}

export interface HealthView {
  /** The `/readyz` answer: Redis state and the degraded modes. */
  readonly readiness: Readonly<Record<string, string>>;
  readonly providers: readonly ProviderHealth[];
  readonly aliases: readonly AliasEntry[];
}

/** The provider endpoints in manifest order, with what is known of each. */
export function providerHealth(registry: ModelRegistry, endpoints: ProviderEndpoints): ProviderHealth[] {
  return registry.plugins.map((plugin) => {
    const endpoint = endpoints.get(plugin.vendor);
    return {
      vendor: plugin.vendor,
      env_prefix: endpoints.envPrefix(plugin.vendor),
      endpoint: endpoint ? `${endpoint.origin}${endpoint.basePath}` : null,
      status: endpoint ? 'configured' : 'not configured',
    };
  });
}

/** The alias table in force, read from the registry (so a configured override shows its real target). */
export function aliasTable(registry: ModelRegistry): AliasEntry[] {
  return registry.plugins.flatMap((plugin) =>
    (plugin.aliases ?? []).map((alias) => {
      const route = alias.routes[0];
      return { alias: alias.id, vendor: plugin.vendor, target: route ? registry.resolve(route, alias.id).canonicalId : alias.target, routes: alias.routes };
    }),
  );
}
