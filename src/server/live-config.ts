import { createHash } from 'node:crypto';
import { readFileSync, unwatchFile, watch, watchFile, type FSWatcher } from 'node:fs';
import { basename, dirname, resolve } from 'node:path';
import type { Logger } from 'pino';
import { ModelRegistry } from '../core/model-registry.ts';
import type { GuardrailPlugin, ProviderPlugin } from '../plugins/plugin-contract.ts';
import { buildGuardrailSet, guardrailPluginProblems, type GuardrailSet } from '../guardrails/guardrail-set.ts';
import { PluginLoadError } from '../plugins/validate-plugin.ts';
import { fallbackTable, type FallbackTable } from '../data-plane/routes/model-fallbacks.ts';
import type { ProviderEndpoints } from '../data-plane/upstream/endpoint-pool.ts';
import type { ConfigProblem } from '../config/config-problems.ts';
import { ConfigError, inspectConfig, type GatewayConfig } from '../config/gateway-config.ts';

/** The config file the gateway reads: `GATEWAY_CONFIG`, else `config/gateway.yaml`, from `cwd`. */
export function configFilePath(env: NodeJS.ProcessEnv, cwd = process.cwd()): string {
  return resolve(cwd, env.GATEWAY_CONFIG ?? 'config/gateway.yaml');
}

/** A short hash of the file's bytes (empty when there is none), so instances can be checked for convergence. */
export function configVersion(path: string): string {
  let bytes: Buffer;
  try {
    bytes = readFileSync(path);
  } catch {
    bytes = Buffer.alloc(0);
  }
  return createHash('sha256').update(bytes).digest('hex').slice(0, 12);
}

/** Everything a request reads from the configuration, swapped as one reference. */
export interface LiveSettings {
  /** {@link configVersion} of the file these settings came from. */
  readonly version: string;
  readonly config: GatewayConfig;
  readonly registry: ModelRegistry;
  readonly endpoints: ProviderEndpoints;
  /** The model fallbacks, checked against this registry. */
  readonly fallbacks: FallbackTable;
  /** The guardrails (`guardrails:`), built once per configuration; undefined when none is configured. */
  readonly guardrails: GuardrailSet | undefined;
}

/**
 * Every problem of the aliases of a config (each target exists and serves every route its alias is
 * used on, §2.1), as `aliases.<id>: <why>`; empty when the table builds.
 */
export function aliasProblems(
  plugins: readonly ProviderPlugin[],
  aliases: Readonly<Record<string, string>>,
): ConfigProblem[] {
  const problems: ConfigProblem[] = [];
  for (const [alias, target] of Object.entries(aliases)) {
    try {
      new ModelRegistry(plugins, { [alias]: target });
    } catch (error) {
      if (!(error instanceof PluginLoadError)) throw error;
      problems.push({ text: `aliases.${alias}: ${error.message}`, at: ['aliases', alias] });
    }
  }
  if (problems.length === 0) {
    try {
      new ModelRegistry(plugins, aliases);
    } catch (error) {
      if (!(error instanceof PluginLoadError)) throw error;
      problems.push({ text: `aliases: ${error.message}`, at: ['aliases'] });
    }
  }
  return problems;
}

/** Every problem of the fallbacks of a config: each source, then each of its targets, checked alone. */
export function fallbackProblems(
  plugins: readonly ProviderPlugin[],
  fallbacks: Readonly<Record<string, readonly string[]>>,
): ConfigProblem[] {
  // Fallbacks name canonical models, which alias overrides do not change.
  const registry = new ModelRegistry(plugins);
  const problems: ConfigProblem[] = [];
  const check = (table: Record<string, readonly string[]>, at: ConfigProblem['at']) => {
    try {
      fallbackTable(registry, table);
      return true;
    } catch (error) {
      if (!(error instanceof ConfigError)) throw error;
      problems.push({ text: error.message, at });
      return false;
    }
  };
  for (const [source, targets] of Object.entries(fallbacks)) {
    if (!check({ [source]: [] }, ['fallbacks', source])) continue;
    targets.forEach((target, index) => check({ [source]: [target] }, ['fallbacks', source, index]));
  }
  return problems;
}

/**
 * What a config must pass against the loaded plugins besides its own checks: aliases and fallbacks, and
 * (given the guardrail plugins) that each guardrail entry's `use` is built in or loaded, with options its plugin
 * accepts.
 */
export function modelTableProblems(
  plugins: readonly ProviderPlugin[],
  config: GatewayConfig,
  guardrailPlugins: readonly GuardrailPlugin[] = [],
): ConfigProblem[] {
  return [
    ...aliasProblems(plugins, config.aliases),
    ...fallbackProblems(plugins, config.fallbacks),
    ...guardrailPluginProblems(config.guardrails, guardrailPlugins),
  ];
}

/** Settings that only a restart can change, each with the name an operator knows it by. */
function restartOnlyChanges(running: GatewayConfig, next: GatewayConfig): string[] {
  const changes: string[] = [];
  if (next.port !== running.port) changes.push(`server.port (${running.port} → ${next.port})`);
  if (next.host !== running.host) changes.push(`server.host (${running.host} → ${next.host})`);
  if (JSON.stringify(next.redis ?? null) !== JSON.stringify(running.redis ?? null)) changes.push('redis');
  return changes;
}

/** The symlink a Kubernetes ConfigMap or Secret volume swaps atomically on an update (kubelet's atomic writer). */
const KUBERNETES_VOLUME_DATA = '..data';

export interface LiveConfigOptions {
  readonly plugins: readonly ProviderPlugin[];
  /** The guardrail plugins the manifests list (what a guardrail entry's `use` may name besides the built-in kinds). */
  readonly guardrailPlugins?: readonly GuardrailPlugin[];
  readonly env: NodeJS.ProcessEnv;
  readonly cwd?: string;
  /** The configuration the gateway started with (its tables are built as a reload builds them). */
  readonly config: GatewayConfig;
  /**
   * The one function that builds the endpoint table from a configuration (the endpoint pools plug in
   * here); at a reload `previous` is the table in force, whose breaker state the new one may carry over.
   */
  readonly buildEndpoints: (config: GatewayConfig, previous?: ProviderEndpoints) => ProviderEndpoints;
  /** Applies what is not read through {@link LiveConfig.current} (log level, rate limits); called after the swap. */
  readonly onApplied?: (settings: LiveSettings, previous: LiveSettings) => void;
  readonly onResult?: (result: 'applied' | 'rejected') => void;
  readonly logger: Logger;
  /** Quiet time after the last change event before the file is read, in ms. */
  readonly debounceMs?: number;
  /** Watches the file's directory: `fs.watch` by default (tests make it fail, to exercise the polling fallback). */
  readonly watchDirectory?: (directory: string, onChange: (event: string, name: string | null) => void) => FSWatcher;
}

export interface ReloadResult {
  readonly applied: boolean;
  readonly version: string;
  readonly error?: string;
}

/**
 * The running configuration, reloaded from its file on demand (SIGHUP) or when the file changes.
 * A reload validates the whole file and builds a complete new {@link LiveSettings} before swapping one
 * reference, so a request sees the old table or the new one, never half of each; a request that already
 * read the table finishes with it. An invalid file, or one that changes what needs a restart, keeps the
 * previous settings and is remembered as {@link lastError} (shown by `/readyz`): the configuration in
 * force is then stale.
 */
export class LiveConfig {
  current: LiveSettings;
  /** Why the file was last refused, by position and field (never its text); undefined once a reload applies. */
  lastError: string | undefined;
  readonly path: string;
  private watcher: FSWatcher | undefined;
  private timer: NodeJS.Timeout | undefined;
  /** The version of the file as last read for a reload, so one save seen as several events reloads once. */
  private seen: string;
  private polling = false;

  constructor(private readonly options: LiveConfigOptions) {
    this.path = configFilePath(options.env, options.cwd);
    const problems = modelTableProblems(options.plugins, options.config, options.guardrailPlugins);
    if (problems.length) throw new ConfigError(inspectConfig(options.env, options.cwd).describe(problems));
    this.current = this.settingsFor(configVersion(this.path), options.config);
    this.seen = this.current.version;
  }

  /** Everything built from one configuration; throws {@link ConfigError} where its tables do not build. */
  private settingsFor(version: string, config: GatewayConfig): LiveSettings {
    const registry = new ModelRegistry(this.options.plugins, config.aliases);
    // At start `current` is not set yet: there is no table to carry anything over from.
    const previous = this.current as LiveSettings | undefined;
    return {
      version,
      config,
      registry,
      fallbacks: fallbackTable(registry, config.fallbacks),
      endpoints: this.options.buildEndpoints(config, previous?.endpoints),
      guardrails: buildGuardrailSet(config.guardrails, this.options.guardrailPlugins ?? []),
    };
  }

  /** Reads, validates and applies the file. Never throws: a refusal is logged and returned. */
  reload(trigger: string): ReloadResult {
    const { logger } = this.options;
    const version = configVersion(this.path);
    this.seen = version;
    try {
      const inspection = inspectConfig(this.options.env, this.options.cwd);
      const { config } = inspection;
      const problems = [
        ...inspection.problems,
        ...inspection.describe(modelTableProblems(this.options.plugins, config, this.options.guardrailPlugins)),
      ];
      if (problems.length) throw new ConfigError(problems);
      const restart = restartOnlyChanges(this.current.config, config);
      if (restart.length)
        throw new ConfigError(`${restart.join(', ')} changed: these need a restart, nothing was applied`);
      const next = this.settingsFor(version, config);
      const previous = this.current;
      this.current = next;
      this.lastError = undefined;
      this.options.onApplied?.(this.current, previous);
      this.options.onResult?.('applied');
      logger.info({ trigger, config_version: version, previous_version: previous.version }, 'configuration reloaded');
      return { applied: true, version };
    } catch (error) {
      if (!(error instanceof ConfigError) && !(error instanceof PluginLoadError)) throw error;
      this.lastError = error.message;
      this.options.onResult?.('rejected');
      logger.error(
        { trigger, config_version: this.current.version, rejected_version: version, reason: error.message },
        'configuration reload refused; the previous configuration stays in force (stale until a reload applies)',
      );
      return { applied: false, version: this.current.version, error: error.message };
    }
  }

  /**
   * Reloads when the file changes: the directory is watched, so editors that replace the file are seen,
   * and so is a Kubernetes ConfigMap or Secret volume, where the file is a symlink through `..data` and
   * an update renames a new `..data` over the old one (no event names the file itself). Where the system
   * refuses a watch (inotify limits), the file is polled every second instead (through its symlinks).
   */
  watch(): void {
    const name = basename(this.path);
    try {
      const watchDirectory = this.options.watchDirectory ?? ((directory, onChange) => watch(directory, onChange));
      this.watcher = watchDirectory(dirname(this.path), (_event, changed) => {
        if (changed === null || changed === name || changed === KUBERNETES_VOLUME_DATA) this.changed();
      });
      this.watcher.on('error', (error) => this.poll(error));
      this.watcher.unref();
    } catch (error) {
      this.poll(error);
    }
  }

  private poll(reason: unknown): void {
    this.watcher?.close();
    this.watcher = undefined;
    if (this.polling) return;
    this.polling = true;
    this.options.logger.warn(
      { err: reason, path: this.path },
      'cannot watch the config file; polling it every second instead',
    );
    watchFile(this.path, { interval: 1000, persistent: false }, () => this.changed());
  }

  private changed(): void {
    clearTimeout(this.timer);
    this.timer = setTimeout(() => {
      // A save seen as several events, or a touch without a change: nothing to read again.
      if (configVersion(this.path) !== this.seen) this.reload('file change');
    }, this.options.debounceMs ?? 200);
    this.timer.unref();
  }

  close(): void {
    clearTimeout(this.timer);
    this.watcher?.close();
    if (this.polling) unwatchFile(this.path);
  }
}
