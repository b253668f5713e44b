import { existsSync, readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { register } from 'node:module';
import { fileURLToPath, pathToFileURL } from 'node:url';
import type { ProviderPlugin } from './plugin-contract.ts';
import { recordOrigin } from './plugin-origin.ts';
import { KNOWN_FIELDS, unknownField } from './known-fields.ts';
import { ManifestError, PluginLoadError, validatePlugin } from './validate-plugin.ts';

/** The module file of a plugin folder, in the order the loader looks for it: compiled JavaScript first. */
export const PLUGIN_ENTRY_FILES = ['index.js', 'index.mjs', 'index.ts'] as const;

/** One plugin folder named by a manifest, before it is imported. */
export interface PluginFolder {
  /** The manifest entry: the folder name, which is also the plugin's vendor. */
  readonly name: string;
  /** Absolute path of the folder. */
  readonly directory: string;
  /** The manifest that lists it. */
  readonly manifestPath: string;
}

/**
 * Reads one manifest (`{"plugins": ["<vendor>", ...]}`, catalog order) and lists its plugin folders,
 * `<manifest dir>/<vendor>/`. Throws {@link PluginLoadError} naming the manifest and the bad entry.
 */
export function readManifest(manifestPath: string): PluginFolder[] {
  let manifest: unknown;
  try {
    manifest = JSON.parse(readFileSync(manifestPath, 'utf8'));
  } catch (error) {
    const reason = (error as NodeJS.ErrnoException).code === 'ENOENT' ? 'no such file' : (error as Error).message.replace(/\s*\n\s*/g, ' ');
    throw new ManifestError(manifestPath, 'file', `cannot be read as JSON: ${reason}`);
  }
  if (manifest === null || typeof manifest !== 'object' || Array.isArray(manifest)) {
    throw new ManifestError(manifestPath, 'file', 'must be an object: {"plugins": ["<vendor>", ...]}');
  }
  const unknown = unknownField(manifest as Record<string, unknown>, KNOWN_FIELDS.manifest);
  if (unknown) throw new ManifestError(manifestPath, unknown.field, unknown.problem);
  const names = (manifest as { plugins?: unknown }).plugins;
  if (names === undefined) throw new ManifestError(manifestPath, 'plugins', 'missing: list the plugin folder names, {"plugins": ["<vendor>", ...]}');
  if (!Array.isArray(names) || names.length === 0 || names.some((name) => typeof name !== 'string')) {
    throw new ManifestError(manifestPath, 'plugins', 'must be a non-empty list of plugin folder names');
  }
  const duplicate = names.find((name, index) => names.indexOf(name) !== index);
  if (duplicate) throw new ManifestError(manifestPath, 'plugins', `'${duplicate}' is listed twice`);
  return (names as string[]).map((name, index) => {
    if (!/^[a-z0-9][a-z0-9-]*$/.test(name)) {
      throw new ManifestError(manifestPath, `plugins[${index}]`, `'${name}' must be a folder name (lower case letters, digits, dashes)`);
    }
    return { name, directory: join(dirname(manifestPath), name), manifestPath };
  });
}

/**
 * The plugin folders of the repository manifest, then of each directory of `GATEWAY_PLUGIN_PATH`
 * (each holding its own `manifest.json`), in that order, which is the catalog order. A vendor listed
 * by two manifests is refused, naming both directories.
 */
export function pluginFolders(manifestPath: string, pluginPath: readonly string[] = []): PluginFolder[] {
  const manifests = [resolve(manifestPath)];
  for (const directory of pluginPath) {
    const path = resolve(directory, 'manifest.json');
    if (!existsSync(path)) {
      throw new ManifestError(path, 'GATEWAY_PLUGIN_PATH', existsSync(directory) ? `the directory ${resolve(directory)} holds no manifest.json` : `the directory ${resolve(directory)} does not exist`);
    }
    if (!manifests.includes(path)) manifests.push(path);
  }
  const folders: PluginFolder[] = [];
  for (const manifest of manifests) {
    for (const folder of readManifest(manifest)) {
      const holder = folders.find((other) => other.name === folder.name);
      if (holder) {
        throw new PluginLoadError(folder.name, 'vendor', `claimed twice, by ${holder.directory} and ${folder.directory}`);
      }
      folders.push(folder);
    }
  }
  return folders;
}

/** This module runs as TypeScript source (tsx in development and tests), so `.ts` imports work already. */
const RUNNING_TYPESCRIPT = import.meta.url.endsWith('.ts');
let typeScriptLoader: Promise<void> | undefined;

/**
 * Registers tsx's ESM loader once, on demand: compiled gateways run on plain `node`, which cannot
 * import `.ts` on Node 20. tsx is a development dependency: a production install serves plugins
 * compiled to JavaScript, and says so for a `.ts` one.
 */
function ensureTypeScriptLoader(): Promise<void> {
  typeScriptLoader ??= import('tsx/esm/api').then(
    ({ register }) => void register(),
    () => {
      throw new Error('a TypeScript plugin needs tsx (a development dependency) to load in the compiled gateway: compile the plugin to JavaScript (index.js), or install tsx beside the gateway');
    },
  );
  return typeScriptLoader;
}

/** The package specifier plugins import the contract by. */
export const CONTRACT_SPECIFIER = 'model-gateway/plugin';

/**
 * A module resolve hook (run by Node in its loader thread, so plain JavaScript in a data: URL): the
 * specifier `model-gateway/plugin` resolves to the running gateway's own contract module, from any
 * directory, so that an external plugin needs no install step of its own and sees the same contract
 * the gateway checks it against.
 */
const RESOLVE_HOOK = `let target;
export async function initialize(data) { target = data.target; }
export async function resolve(specifier, context, next) {
  // Resolved on through the chain (not short-circuited), so a TypeScript loader sees the .ts target too.
  if (specifier === ${JSON.stringify(CONTRACT_SPECIFIER)}) return next(target, context);
  return next(specifier, context);
}`;
let contractResolver = false;

// The plugins shipped with this code: `providers/` of the checkout, or `dist/providers/` when compiled.
const SHIPPED_PLUGINS = fileURLToPath(new URL('../../providers/', import.meta.url));

/** Registers {@link RESOLVE_HOOK} once, pointing at this gateway's contract (source or compiled, as this module runs). */
export function ensureContractResolver(): void {
  if (contractResolver) return;
  contractResolver = true;
  const target = new URL(`./plugin-contract.${RUNNING_TYPESCRIPT ? 'ts' : 'js'}`, import.meta.url).href;
  register(`data:text/javascript,${encodeURIComponent(RESOLVE_HOOK)}`, { data: { target } });
}

/** Imports one plugin folder's module and checks the declaration whole. */
export async function loadPluginFolder(folder: PluginFolder): Promise<ProviderPlugin> {
  if (!existsSync(folder.directory)) {
    throw new PluginLoadError(folder.name, 'folder', `${folder.directory} does not exist (${folder.manifestPath} lists '${folder.name}': create the folder, or remove the entry)`);
  }
  const entry = PLUGIN_ENTRY_FILES.map((file) => join(folder.directory, file)).find((file) => existsSync(file));
  if (!entry) {
    throw new PluginLoadError(folder.name, 'module', `the folder holds no plugin module: write index.ts (or compiled index.js / index.mjs) there`, folder.directory);
  }
  let module: { default?: unknown };
  try {
    if (!RUNNING_TYPESCRIPT && entry.endsWith('.ts')) await ensureTypeScriptLoader();
    // The shipped plugins import the contract by path; only a plugin from elsewhere needs the hook (and its loader thread).
    if (!folder.directory.startsWith(SHIPPED_PLUGINS)) ensureContractResolver();
    module = (await import(pathToFileURL(entry).href)) as { default?: unknown };
  } catch (error) {
    const message = (error as Error).message;
    const hints = [
      ...(/require\(|Require stack/.test(message) ? ['plugins are ES modules: give their directory a package.json with {"type": "module"}'] : []),
      ...(/Cannot find (package|module) 'model-gateway\//.test(message) ? [`plugins import the contract as '${CONTRACT_SPECIFIER}' (no other path of the gateway)`] : []),
    ];
    const hint = hints.length ? ` (${hints.join('; ')})` : '';
    throw new PluginLoadError(folder.name, entry.slice(folder.directory.length + 1), `cannot be loaded: ${message.split('\n')[0]}${hint}`, entry);
  }
  try {
    const plugin = validatePlugin(folder.name, module.default);
    recordOrigin(plugin, folder.directory);
    return plugin;
  } catch (error) {
    throw error instanceof PluginLoadError ? error.at(entry) : error;
  }
}

/**
 * Loads the repository's plugins (`manifestPath`) and those of each directory of `pluginPath`
 * (`GATEWAY_PLUGIN_PATH`), in catalog order, checking each whole. Throws {@link PluginLoadError}
 * naming the plugin, its directory and the bad field.
 */
export async function loadPlugins(manifestPath: string, pluginPath: readonly string[] = []): Promise<ProviderPlugin[]> {
  const plugins: ProviderPlugin[] = [];
  for (const folder of pluginFolders(manifestPath, pluginPath)) plugins.push(await loadPluginFolder(folder));
  return plugins;
}
