import type { ModelRegistry } from '../../core/model-registry.ts';
import type { ProviderEndpoints } from '../../data-plane/upstream/endpoint-pool.ts';

/** One upstream endpoint of a provider as the health view lists it (one row for an unconfigured provider). */
export interface ProviderHealth {
  readonly vendor: string;
  /** What an operator sets: `<PREFIX>_BASE_URL`, `<PREFIX>_API_KEY`. */
  readonly env_prefix: string;
  /** The endpoint's configured name, or its index in the provider's pool; null when unconfigured. */
  readonly name: string | null;
  /** Origin and version prefix of the upstream; never its credential. Null when unconfigured. */
  readonly endpoint: string | null;
  /**
   * The endpoint's breaker: `up`, `resting` (tripped, or told to wait by Retry-After) or `trial` (one
   * half-open request deciding); `not configured` for a provider without endpoints.
   */
  readonly status: string;
  /** Failures in a row, which trip the breaker at the configured threshold. */
  readonly consecutive_failures: number;
  /** ISO time the rest ends, while resting. */
  readonly resting_until: string | null;
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
  readonly readiness: Readonly<Record<string, string | boolean>>;
  readonly providers: readonly ProviderHealth[];
  readonly aliases: readonly AliasEntry[];
}

/** Every provider's upstream endpoints in manifest order, each with its breaker state. */
export function providerHealth(registry: ModelRegistry, endpoints: ProviderEndpoints): ProviderHealth[] {
  return registry.plugins.flatMap((plugin): ProviderHealth[] => {
    const vendor = plugin.vendor;
    const env_prefix = endpoints.envPrefix(vendor);
    const pool = endpoints.pool(vendor);
    if (!pool)
      return [
        {
          vendor,
          env_prefix,
          name: null,
          endpoint: null,
          status: 'not configured',
          consecutive_failures: 0,
          resting_until: null,
        },
      ];
    const states = pool.state();
    return pool.endpoints.map(({ endpoint }, index) => {
      const state = states[index]!;
      return {
        vendor,
        env_prefix,
        name: state.name,
        endpoint: `${endpoint.origin}${endpoint.basePath}`,
        status: state.status,
        consecutive_failures: state.consecutiveFailures,
        resting_until: state.restingUntil ? new Date(state.restingUntil).toISOString() : null,
      };
    });
  });
}

/** The alias table in force, read from the registry (so a configured override shows its real target). */
export function aliasTable(registry: ModelRegistry): AliasEntry[] {
  return registry.plugins.flatMap((plugin) =>
    (plugin.aliases ?? []).map((alias) => {
      const route = alias.routes[0];
      return {
        alias: alias.id,
        vendor: plugin.vendor,
        target: route ? registry.resolve(route, alias.id).canonicalId : alias.target,
        routes: alias.routes,
      };
    }),
  );
}
