import { KNOWN_FIELDS, isRecord } from './known-fields.ts';
import { SUPPORTED_CONTRACT_VERSIONS, type ProviderPlugin } from './plugin-contract.ts';
import { guardAdapters } from './adapter-hooks.ts';
import { DeclarationProblems } from './declaration-problems.ts';
import { guardHooks } from './plugin-fault.ts';
import { checkAliases, checkModels } from './validate-models.ts';
import { checkRoutes, type DeclaresRoute } from './validate-routes.ts';
import { checkScopedHooks } from './validate-scoped-hooks.ts';

export { ROUTE_IDS } from './validate-routes.ts';

/**
 * A plugin that does not fit the contract, on one line: the plugin, the bad field and, when known, the
 * file it is declared in (or the plugin's directory, when there is no file to name).
 *
 * One error may carry several problems (every problem of a plugin, of every plugin loaded):
 * {@link PluginLoadError.combine} makes it, {@link PluginLoadError.problems} lists them one per line,
 * and `message` joins them with `; `. `plugin`, `field`, `problem` and `location` are the first one's.
 */
export class PluginLoadError extends Error {
  /** The single problems this error carries, when it carries more than one. */
  #parts: readonly PluginLoadError[] | undefined;

  constructor(
    readonly plugin: string,
    readonly field: string,
    readonly problem: string,
    readonly location?: string,
  ) {
    super(`plugin '${plugin}': ${field}: ${problem}${location ? ` (in ${location})` : ''}`);
    this.name = 'PluginLoadError';
  }

  /**
   * One error carrying every problem of `errors` (each of them may carry several already), in order;
   * the error itself when there is only one. `errors` must not be empty.
   */
  static combine(errors: readonly PluginLoadError[]): PluginLoadError {
    const parts = errors.flatMap((error) => error.parts);
    const first = parts[0];
    if (!first) throw new RangeError('PluginLoadError.combine needs at least one error');
    if (parts.length === 1) return first;
    const combined = new PluginLoadError(first.plugin, first.field, first.problem, first.location);
    combined.#parts = parts;
    combined.message = parts.map((part) => part.message).join('; ');
    return combined;
  }

  /** Each problem as an error of its own (this error alone when it carries one). */
  get parts(): readonly PluginLoadError[] {
    return this.#parts ?? [this];
  }

  /** Every problem, one line each: the plugin (or manifest), the field and where it is declared. */
  get problems(): readonly string[] {
    return this.parts.map((part) => part.message);
  }

  /** The same error, naming the file (or directory) of the plugin where a problem names none. */
  at(location: string): PluginLoadError {
    if (this.#parts) return PluginLoadError.combine(this.#parts.map((part) => part.at(location)));
    return this.location ? this : new PluginLoadError(this.plugin, this.field, this.problem, location);
  }
}

/** A manifest that cannot be read: names the manifest file and the bad key or entry, on one line. */
export class ManifestError extends PluginLoadError {
  constructor(
    readonly manifestPath: string,
    field: string,
    problem: string,
  ) {
    super('manifest', field, problem, manifestPath);
    this.message = `manifest ${manifestPath}: ${field}: ${problem}`;
    this.name = 'ManifestError';
  }
}

/**
 * Checks one plugin whole, as it came from its module (so nothing about it is trusted), and throws a
 * {@link PluginLoadError} carrying every bad field, each named with its path. A check that needs an
 * earlier one to pass (a field of the wrong type, a reference to a route or model the plugin does not
 * declare validly) is skipped when that one fails, so one mistake is one problem. Cross-plugin checks
 * (an ID claimed twice) are the registry's.
 */
export function validatePlugin(name: string, candidate: unknown): ProviderPlugin {
  if (!isRecord(candidate))
    throw new PluginLoadError(name, 'default export', 'must be the object made by definePlugin({...})');
  const plugin = candidate;
  const problems = new DeclarationProblems();
  problems.refuseUnknownFields(plugin, KNOWN_FIELDS.plugin, '');
  checkContract(problems, plugin.contract);
  checkVendor(problems, name, plugin);
  const declares = checkRoutes(problems, plugin.routes);
  checkNativeChat(problems, plugin.nativeChat, declares);
  const nativeChat = plugin.nativeChat !== undefined;
  const models = checkModels(problems, plugin.models, { vendor: name, declares, nativeChat });
  checkAliases(problems, plugin.aliases ?? [], models);
  checkScopedHooks(problems, plugin, { declares, models });
  if (problems.found.length) {
    const errors = problems.found.map(({ field, problem }) => new PluginLoadError(name, field, problem));
    throw PluginLoadError.combine(errors);
  }
  // Hooks come out guarded: a throw is the plugin's fault, named with the plugin and the hook.
  return guardAdapters(guardHooks(plugin as unknown as ProviderPlugin));
}

/** Refuses a missing `contract`, or a version this gateway does not support, naming the supported ones. */
function checkContract(problems: DeclarationProblems, contract: unknown): void {
  const supported = SUPPORTED_CONTRACT_VERSIONS.join(', ');
  if (contract === undefined)
    problems.add(
      'contract',
      `missing: declare the contract version the plugin is written for (this gateway supports ${supported})`,
    );
  else if (!(SUPPORTED_CONTRACT_VERSIONS as readonly unknown[]).includes(contract)) {
    problems.add(
      'contract',
      `version ${JSON.stringify(contract)} is not supported (this gateway supports ${supported})`,
    );
  }
}

/** Refuses a `vendor` that is not the plugin's name, a name that cannot be a vendor, and a bad `envPrefix`. */
function checkVendor(problems: DeclarationProblems, name: string, plugin: Record<string, unknown>): void {
  if (plugin.vendor !== name)
    problems.add(
      'vendor',
      `must equal the plugin's folder and manifest name '${name}', got ${JSON.stringify(plugin.vendor)}`,
    );
  if (!/^[a-z0-9][a-z0-9-]*$/.test(name)) problems.add('vendor', 'must be lower case letters, digits and dashes');
  if (
    plugin.envPrefix !== undefined &&
    !(typeof plugin.envPrefix === 'string' && /^[A-Z][A-Z0-9_]*$/.test(plugin.envPrefix))
  ) {
    problems.add('envPrefix', 'must be upper case letters, digits and underscores');
  }
}

/** Refuses a `nativeChat` adapter, when declared, that is not on one of the plugin's routes or lacks its functions. */
function checkNativeChat(problems: DeclarationProblems, adapter: unknown, declares: DeclaresRoute): void {
  if (adapter === undefined) return;
  if (!isRecord(adapter)) {
    problems.add('nativeChat', 'must be an object');
    return;
  }
  problems.refuseUnknownFields(adapter, KNOWN_FIELDS.nativeChat, 'nativeChat');
  if (declares(adapter.route) === false)
    problems.add('nativeChat.route', `'${String(adapter.route)}' is not one of the plugin's routes`);
  if (typeof adapter.buildRequest !== 'function') problems.add('nativeChat.buildRequest', 'must be a function');
  if (typeof adapter.readText !== 'function') problems.add('nativeChat.readText', 'must be a function');
}
