import type { Logger } from 'pino';
import { providerSettings, type GatewayConfig } from '../config/gateway-config.ts';
import type { ProviderPlugin } from '../plugins/plugin-contract.ts';
import type { ProviderEndpoints } from '../routes/route-services.ts';
import { upstreamEndpoint, type UpstreamEndpoint } from './upstream-client.ts';

export function envPrefixOf(plugin: ProviderPlugin): string {
  return plugin.envPrefix ?? plugin.vendor.toUpperCase().replace(/-/g, '_');
}

/**
 * Each plugin's upstream from `<PREFIX>_BASE_URL` / `<PREFIX>_API_KEY` (or the config file). A provider
 * without a base URL stays unconfigured: start-up warns, and its models answer 502 saying what to set.
 */
export function providerEndpoints(
  plugins: readonly ProviderPlugin[],
  config: GatewayConfig,
  env: NodeJS.ProcessEnv,
  logger: Logger,
): ProviderEndpoints {
  const endpoints = new Map<string, UpstreamEndpoint>();
  const prefixes = new Map<string, string>();
  for (const plugin of plugins) {
    const prefix = envPrefixOf(plugin);
    prefixes.set(plugin.vendor, prefix);
    const settings = providerSettings(config, plugin.vendor, prefix, env);
    if (settings.baseUrl) {
      endpoints.set(plugin.vendor, upstreamEndpoint(plugin.vendor, settings.baseUrl, settings.apiKey));
    } else {
      logger.warn({ provider: plugin.vendor }, `provider '${plugin.vendor}' is not configured: set ${prefix}_BASE_URL (its models answer 502 until then)`);
    }
  }
  return {
    get: (vendor) => endpoints.get(vendor),
    envPrefix: (vendor) => prefixes.get(vendor) ?? vendor.toUpperCase(),
  };
}
