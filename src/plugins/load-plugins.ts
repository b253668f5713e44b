import { existsSync, readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import type { ProviderPlugin } from './plugin-contract.ts';
import { PluginLoadError, validatePlugin } from './validate-plugin.ts';

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
    throw new PluginLoadError('manifest', manifestPath, `cannot be read as JSON: ${(error as Error).message}`);
  }
  const names = (manifest as { plugins?: unknown } | null)?.plugins;
  if (!Array.isArray(names) || names.length === 0 || names.some((name) => typeof name !== 'string')) {
    throw new PluginLoadError('manifest', 'plugins', `must be a non-empty list of plugin folder names (in ${manifestPath})`);
  }
  const duplicate = names.find((name, index) => names.indexOf(name) !== index);
  if (duplicate) throw new PluginLoadError('manifest', 'plugins', `'${duplicate}' is listed twice (in ${manifestPath})`);
  return (names as string[]).map((name) => {
    if (!/^[a-z0-9][a-z0-9-]*$/.test(name)) {
      throw new PluginLoadError(name, 'manifest entry', `must be a folder name (lower case letters, digits, dashes) (in ${manifestPath})`);
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
    if (!existsSync(path)) throw new PluginLoadError('manifest', 'GATEWAY_PLUGIN_PATH', `${resolve(directory)} holds no manifest.json`);
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

/** Imports one plugin folder's module and checks the declaration whole. */
export async function loadPluginFolder(folder: PluginFolder): Promise<ProviderPlugin> {
  const entry = PLUGIN_ENTRY_FILES.map((file) => join(folder.directory, file)).find((file) => existsSync(file));
  if (!entry) {
    throw new PluginLoadError(folder.name, 'module', `no ${PLUGIN_ENTRY_FILES.join(', ')} found`, folder.directory);
  }
  let module: { default?: unknown };
  try {
    if (!RUNNING_TYPESCRIPT && entry.endsWith('.ts')) await ensureTypeScriptLoader();
    module = (await import(pathToFileURL(entry).href)) as { default?: unknown };
  } catch (error) {
    const message = (error as Error).message;
    const hints = [
      ...(/require\(|Require stack/.test(message) ? ['plugins are ES modules: give their directory a package.json with {"type": "module"}'] : []),
      ...(/Cannot find (package|module) 'model-gateway/.test(message)
        ? ['the plugin imports model-gateway/plugin: make the gateway resolvable from its directory, e.g. `npm install <path to model-gateway>` there']
        : []),
    ];
    const hint = hints.length ? ` (${hints.join('; ')})` : '';
    throw new PluginLoadError(folder.name, entry.slice(folder.directory.length + 1), `cannot be loaded: ${message}${hint}`, folder.directory);
  }
  try {
    return validatePlugin(folder.name, module.default);
  } catch (error) {
    throw error instanceof PluginLoadError ? error.inDirectory(folder.directory) : error;
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
