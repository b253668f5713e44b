import type { Logger } from 'pino';
import type { Current } from '../../core/current.ts';
import type { GatewayConfig } from '../../config/gateway-config.ts';
import type { ModelRegistry } from '../../core/model-registry.ts';
import { type ProviderEndpoints, providerEndpoints } from '../../data-plane/upstream/endpoint-pool.ts';
import { loadAllPlugins } from '../../plugins/load-plugins.ts';
import type { GuardrailPlugin, ProviderPlugin } from '../../plugins/plugin-contract.ts';
import { originOf } from '../../plugins/plugin-origin.ts';
import { carryBreakerState } from '../breaker-carry-over.ts';
import { LiveConfig, type LiveSettings } from '../live-config.ts';

/** Told of each reload that applied, with the settings now in force and those before. */
export type ReloadListener = (settings: LiveSettings, previous: LiveSettings) => void;

/** The plugins and the live configuration: what every other part reads the settings in force from. */
export interface Configuration {
  readonly plugins: readonly ProviderPlugin[];
  readonly live: LiveConfig;
  /** The model catalog in force. */
  readonly registry: () => ModelRegistry;
  /** The endpoint pools in force (a reload builds new ones). */
  readonly endpoints: ProviderEndpoints;
  /** Adds a listener of the reloads that apply (log level, sampler, route lists, the audit log). */
  onReload(listener: ReloadListener): void;
  /** A value made from the settings in force, made again when a reload applies (read per request as a field). */
  inForce<T>(of: (settings: LiveSettings) => T): Current<T>;
  /** Adds a listener of every reload's result (the metric). */
  onResult(listener: (result: 'applied' | 'rejected') => void): void;
}

/**
 * Loads every plugin (the gateway stops when one is wrong, naming it) and the configuration that a
 * reload replaces whole; logs where each plugin came from.
 */
export async function startConfiguration(
  config: GatewayConfig,
  env: NodeJS.ProcessEnv,
  logger: Logger,
): Promise<Configuration> {
  const { providers: plugins, guardrails: guardrailPlugins } = await loadAllPlugins(
    config.manifestPath,
    config.pluginPath,
  );
  const reloads: ReloadListener[] = [];
  const results: ((result: 'applied' | 'rejected') => void)[] = [];
  const live = new LiveConfig({
    plugins,
    guardrailPlugins,
    env,
    config,
    // A reload keeps the breaker state (rests, failure counts) of the endpoints it does not change.
    buildEndpoints: (settings, previous) =>
      carryBreakerState(previous, providerEndpoints(plugins, settings, env, logger)),
    logger,
    onApplied: (settings, previous) => reloads.forEach((listener) => listener(settings, previous)),
    onResult: (result) => results.forEach((listener) => listener(result)),
  });
  for (const plugin of plugins) {
    const directory = originOf(plugin);
    const models = plugin.models.length;
    logger.info(
      { plugin: plugin.vendor, directory, models },
      `plugin '${plugin.vendor}' loaded from ${directory}: ${models} model(s)`,
    );
  }
  logGuardrailPlugins(logger, guardrailPlugins);
  return {
    plugins,
    live,
    registry: () => live.current.registry,
    endpoints: {
      get: (vendor) => live.current.endpoints.get(vendor),
      pool: (vendor) => live.current.endpoints.pool(vendor),
      pools: () => live.current.endpoints.pools(),
      envPrefix: (vendor) => live.current.endpoints.envPrefix(vendor),
    },
    onReload: (listener) => void reloads.push(listener),
    inForce(of) {
      const held = { current: of(live.current) };
      reloads.push((settings) => {
        held.current = of(settings);
      });
      return held;
    },
    onResult: (listener) => void results.push(listener),
  };
}

/** One start-up line per guardrail plugin, where it came from. */
function logGuardrailPlugins(logger: Logger, plugins: readonly GuardrailPlugin[]): void {
  for (const plugin of plugins) {
    const directory = originOf(plugin);
    logger.info(
      { guardrail: plugin.guardrail, directory },
      `guardrail plugin '${plugin.guardrail}' loaded from ${directory}`,
    );
  }
}
