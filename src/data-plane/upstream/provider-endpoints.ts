import type { Logger } from 'pino';
import { providerEndpointSettings, type GatewayConfig } from '../../config/gateway-config.ts';
import type { ProviderPlugin } from '../../plugins/plugin-contract.ts';
import { EndpointPool, PooledEndpoint } from './endpoint-pool.ts';
import { upstreamEndpoint, type UpstreamEndpoint } from './upstream-client.ts';

/** Resolved upstream endpoints per vendor; `undefined` where the operator configured none. */
export interface ProviderEndpoints {
  /** The vendor's first endpoint (for views that show one). */
  get(vendor: string): UpstreamEndpoint | undefined;
  /** The vendor's endpoints with their breakers; `state()` lists them for metrics and health views. */
  pool(vendor: string): EndpointPool | undefined;
  /** Every configured vendor's pool. */
  pools(): ReadonlyMap<string, EndpointPool>;
  /** The env prefix an operator sets for the vendor, for the "not configured" message. */
  envPrefix(vendor: string): string;
}

export function envPrefixOf(plugin: ProviderPlugin): string {
  return plugin.envPrefix ?? plugin.vendor.toUpperCase().replace(/-/g, '_');
}

/**
 * Each plugin's pool of upstream endpoints from `<PREFIX>_BASE_URL` / `<PREFIX>_API_KEY` (or the
 * config file). A provider without a base URL stays unconfigured: start-up warns, and its models answer
 * 502 saying what to set. A pure function of its inputs, so a reloaded config can build new pools.
 */
export function providerEndpoints(
  plugins: readonly ProviderPlugin[],
  config: GatewayConfig,
  env: NodeJS.ProcessEnv,
  logger: Logger,
): ProviderEndpoints {
  const pools = new Map<string, EndpointPool>();
  const prefixes = new Map<string, string>();
  for (const plugin of plugins) {
    const prefix = envPrefixOf(plugin);
    prefixes.set(plugin.vendor, prefix);
    const settings = providerEndpointSettings(config, plugin.vendor, prefix, env);
    if (settings.length > 0) {
      const keyless = settings.filter((entry) => !entry.apiKey);
      if (keyless.length) {
        logger.warn(
          { provider: plugin.vendor },
          `provider '${plugin.vendor}' has a base URL but no key: set ${prefix}_API_KEY (its upstream will refuse the requests)`,
        );
      }
      const endpoints = settings.map(
        (entry) =>
          new PooledEndpoint(
            upstreamEndpoint(plugin.vendor, entry.baseUrl, entry.apiKey, entry.auth),
            entry.name,
            entry.weight,
          ),
      );
      pools.set(plugin.vendor, new EndpointPool(endpoints, { ...config.failover, affinity: config.routing.affinity }));
    } else {
      logger.warn(
        { provider: plugin.vendor },
        `provider '${plugin.vendor}' is not configured: set ${prefix}_BASE_URL (its models answer 502 until then)`,
      );
    }
  }
  return endpointsOf(pools, prefixes);
}

/** The {@link ProviderEndpoints} view of built pools. */
export function endpointsOf(
  pools: ReadonlyMap<string, EndpointPool>,
  prefixes: ReadonlyMap<string, string> = new Map(),
): ProviderEndpoints {
  return {
    get: (vendor) => pools.get(vendor)?.endpoints[0]!.endpoint,
    pool: (vendor) => pools.get(vendor),
    pools: () => pools,
    envPrefix: (vendor) => prefixes.get(vendor) ?? vendor.toUpperCase(),
  };
}
