import { existsSync, readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { register } from 'node:module';
import { fileURLToPath, pathToFileURL } from 'node:url';
import type { GuardrailPlugin, ProviderPlugin } from './plugin-contract.ts';
import { declaresGuardrail, validateGuardrail } from './validate-guardrail.ts';
import { recordOrigin } from './plugin-origin.ts';
import { closestName, KNOWN_FIELDS, unknownFields } from './known-fields.ts';
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

/** What reading manifests found: the plugin folders they list validly, and every problem. */
interface FolderInspection {
  readonly folders: PluginFolder[];
  readonly problems: PluginLoadError[];
}

/** Reads one manifest as {@link readManifest} does, keeping every problem instead of throwing the first. */
function inspectManifest(manifestPath: string): FolderInspection {
  const manifest = readManifestObject(manifestPath);
  if (manifest instanceof ManifestError) return { folders: [], problems: [manifest] };
  const unknowns = unknownFields(manifest, KNOWN_FIELDS.manifest);
  const problems: PluginLoadError[] = unknowns.map(
    (unknown) => new ManifestError(manifestPath, unknown.field, unknown.problem),
  );
  const names = manifest.plugins;
  if (names === undefined) {
    // A misspelled `plugins` key is named above: that `plugins` is then missing is the same mistake.
    if (!unknowns.some((unknown) => closestName(unknown.field, KNOWN_FIELDS.manifest) === 'plugins'))
      problems.push(
        new ManifestError(
          manifestPath,
          'plugins',
          'missing: list the plugin folder names, {"plugins": ["<vendor>", ...]}',
        ),
      );
    return { folders: [], problems };
  }
  if (!Array.isArray(names) || names.length === 0 || names.some((name) => typeof name !== 'string')) {
    problems.push(new ManifestError(manifestPath, 'plugins', 'must be a non-empty list of plugin folder names'));
    return { folders: [], problems };
  }
  const listed = listedFolders(manifestPath, names as string[]);
  return { folders: listed.folders, problems: [...problems, ...listed.problems] };
}

/** The manifest file read as a JSON object, or the problem when it cannot be read as one. */
function readManifestObject(manifestPath: string): Record<string, unknown> | ManifestError {
  let manifest: unknown;
  try {
    manifest = JSON.parse(readFileSync(manifestPath, 'utf8'));
  } catch (error) {
    const reason =
      (error as NodeJS.ErrnoException).code === 'ENOENT'
        ? 'no such file'
        : (error as Error).message.replace(/\s*\n\s*/g, ' ');
    return new ManifestError(manifestPath, 'file', `cannot be read as JSON: ${reason}`);
  }
  if (manifest === null || typeof manifest !== 'object' || Array.isArray(manifest)) {
    return new ManifestError(manifestPath, 'file', 'must be an object: {"plugins": ["<vendor>", ...]}');
  }
  return manifest as Record<string, unknown>;
}

/** The folders a manifest's `plugins` list names, each once; refuses a name listed twice and one no folder can have. */
function listedFolders(manifestPath: string, names: readonly string[]): FolderInspection {
  const problems: PluginLoadError[] = [];
  const duplicates = new Set(names.filter((name, index) => names.indexOf(name) !== index));
  for (const duplicate of duplicates)
    problems.push(new ManifestError(manifestPath, 'plugins', `'${duplicate}' is listed twice`));
  const folders: PluginFolder[] = [];
  names.forEach((name, index) => {
    if (!/^[a-z0-9][a-z0-9-]*$/.test(name)) {
      problems.push(
        new ManifestError(
          manifestPath,
          `plugins[${index}]`,
          `'${name}' must be a folder name (lower case letters, digits, dashes)`,
        ),
      );
    } else if (names.indexOf(name) === index) {
      folders.push({ name, directory: join(dirname(manifestPath), name), manifestPath });
    }
  });
  return { folders, problems };
}

/** The folders an inspection found, or every problem it found as one {@link PluginLoadError}. */
function foldersOrRefusal({ folders, problems }: FolderInspection): PluginFolder[] {
  if (problems.length) throw PluginLoadError.combine(problems);
  return folders;
}

/**
 * Reads one manifest (`{"plugins": ["<vendor>", ...]}`, catalog order) and lists its plugin folders,
 * `<manifest dir>/<vendor>/`. Throws {@link PluginLoadError} naming the manifest and every bad key or entry.
 */
export function readManifest(manifestPath: string): PluginFolder[] {
  return foldersOrRefusal(inspectManifest(manifestPath));
}

/**
 * Lists the plugin folders as {@link pluginFolders} does, keeping every problem (of every manifest) instead of
 * throwing.
 */
function inspectPluginFolders(manifestPath: string, pluginPath: readonly string[]): FolderInspection {
  const problems: PluginLoadError[] = [];
  const manifests = [resolve(manifestPath)];
  for (const directory of pluginPath) {
    const path = resolve(directory, 'manifest.json');
    if (!existsSync(path)) {
      problems.push(
        new ManifestError(
          path,
          'GATEWAY_PLUGIN_PATH',
          existsSync(directory)
            ? `the directory ${resolve(directory)} holds no manifest.json`
            : `the directory ${resolve(directory)} does not exist`,
        ),
      );
    } else if (!manifests.includes(path)) manifests.push(path);
  }
  const folders: PluginFolder[] = [];
  for (const manifest of manifests) {
    const inspection = inspectManifest(manifest);
    problems.push(...inspection.problems);
    for (const folder of inspection.folders) {
      const holder = folders.find((other) => other.name === folder.name);
      if (holder)
        problems.push(
          new PluginLoadError(folder.name, 'vendor', `claimed twice, by ${holder.directory} and ${folder.directory}`),
        );
      else folders.push(folder);
    }
  }
  return { folders, problems };
}

/**
 * The plugin folders of the repository manifest, then of each directory of `GATEWAY_PLUGIN_PATH`
 * (each holding its own `manifest.json`), in that order, which is the catalog order. A vendor listed
 * by two manifests is refused, naming both directories. Throws one {@link PluginLoadError} carrying
 * every problem of every manifest.
 */
export function pluginFolders(manifestPath: string, pluginPath: readonly string[] = []): PluginFolder[] {
  return foldersOrRefusal(inspectPluginFolders(manifestPath, pluginPath));
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
      throw new Error(
        'a TypeScript plugin needs tsx (a development dependency) to load in the compiled gateway: compile the plugin to JavaScript (index.js), or install tsx beside the gateway',
      );
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

/**
 * Registers {@link RESOLVE_HOOK} once, pointing at this gateway's contract (source or compiled, as this module runs).
 */
export function ensureContractResolver(): void {
  if (contractResolver) return;
  contractResolver = true;
  const target = new URL(`./plugin-contract.${RUNNING_TYPESCRIPT ? 'ts' : 'js'}`, import.meta.url).href;
  register(`data:text/javascript,${encodeURIComponent(RESOLVE_HOOK)}`, { data: { target } });
}

/** What a plugin folder declares: a provider, or a guardrail. */
export type LoadedFolder =
  | { readonly kind: 'provider'; readonly plugin: ProviderPlugin }
  | { readonly kind: 'guardrail'; readonly guardrail: GuardrailPlugin };

/**
 * Imports one plugin folder's module and checks the declaration whole: throws one {@link PluginLoadError}
 * carrying every problem of the declaration, each naming its file. Refuses a guardrail plugin (see
 * {@link loadFolder}).
 */
export async function loadPluginFolder(folder: PluginFolder): Promise<ProviderPlugin> {
  const loaded = await loadFolder(folder);
  if (loaded.kind === 'provider') return loaded.plugin;
  throw new PluginLoadError(folder.name, 'guardrail', 'is a guardrail plugin, not a provider plugin', folder.directory);
}

/**
 * Imports one plugin folder's module and checks its declaration whole, as a guardrail when it declares
 * `guardrail` (made by defineGuardrail) and no `vendor`, else as a provider: throws one
 * {@link PluginLoadError} carrying every problem of the declaration, each naming its file.
 */
export async function loadFolder(folder: PluginFolder): Promise<LoadedFolder> {
  const entry = moduleFile(folder);
  const module = await importPluginModule(folder, entry);
  try {
    return checkDeclaration(folder, module.default);
  } catch (error) {
    throw error instanceof PluginLoadError ? error.at(entry) : error;
  }
}

/** The plugin folder's module file; refuses a folder that does not exist or holds no module. */
function moduleFile(folder: PluginFolder): string {
  if (!existsSync(folder.directory)) {
    throw new PluginLoadError(
      folder.name,
      'folder',
      `${folder.directory} does not exist (${folder.manifestPath} lists '${folder.name}': create the folder, or remove the entry)`,
    );
  }
  const entry = PLUGIN_ENTRY_FILES.map((file) => join(folder.directory, file)).find((file) => existsSync(file));
  if (!entry) {
    throw new PluginLoadError(
      folder.name,
      'module',
      `the folder holds no plugin module: write index.ts (or compiled index.js / index.mjs) there`,
      folder.directory,
    );
  }
  return entry;
}

/** Imports the plugin's module file; a failure is the plugin's, naming the file and, when known, what to fix. */
async function importPluginModule(folder: PluginFolder, entry: string): Promise<{ default?: unknown }> {
  try {
    if (!RUNNING_TYPESCRIPT && entry.endsWith('.ts')) await ensureTypeScriptLoader();
    // The shipped plugins import the contract by path; only a plugin from elsewhere needs the hook (and its loader
    // thread).
    if (!folder.directory.startsWith(SHIPPED_PLUGINS)) ensureContractResolver();
    return (await import(pathToFileURL(entry).href)) as { default?: unknown };
  } catch (error) {
    const message = (error as Error).message;
    const hints = importHints(message);
    const hint = hints.length ? ` (${hints.join('; ')})` : '';
    throw new PluginLoadError(
      folder.name,
      entry.slice(folder.directory.length + 1),
      `cannot be loaded: ${message.split('\n')[0]}${hint}`,
      entry,
    );
  }
}

/** What to fix for an import failure the loader recognises by its message: none for any other. */
function importHints(message: string): string[] {
  return [
    ...(/require\(|Require stack/.test(message)
      ? ['plugins are ES modules: give their directory a package.json with {"type": "module"}']
      : []),
    ...(/Cannot find (package|module) 'model-gateway\//.test(message)
      ? [`plugins import the contract as '${CONTRACT_SPECIFIER}' (no other path of the gateway)`]
      : []),
  ];
}

/** Checks the module's default export, as a guardrail when it declares one, else as a provider; records its folder. */
function checkDeclaration(folder: PluginFolder, declaration: unknown): LoadedFolder {
  if (declaresGuardrail(declaration)) {
    const guardrail = validateGuardrail(folder.name, declaration);
    recordOrigin(guardrail, folder.directory);
    return { kind: 'guardrail', guardrail };
  }
  const plugin = validatePlugin(folder.name, declaration);
  recordOrigin(plugin, folder.directory);
  return { kind: 'provider', plugin };
}

/**
 * Loads the repository's plugins (`manifestPath`) and those of each directory of `pluginPath`
 * (`GATEWAY_PLUGIN_PATH`), in catalog order, checking each whole. A problem does not stop the checks:
 * every manifest is read and every plugin listed validly is loaded and checked (one whose module
 * cannot be imported is one problem), and then one {@link PluginLoadError} carries every problem, each
 * naming the plugin (or manifest), its file or directory and the bad field.
 */
export async function loadPlugins(manifestPath: string, pluginPath: readonly string[] = []): Promise<ProviderPlugin[]> {
  return (await loadAllPlugins(manifestPath, pluginPath)).providers;
}

/**
 * Every plugin the manifests list, as {@link loadPlugins} loads them: the providers (in catalog order) and the
 * guardrails.
 */
export async function loadAllPlugins(
  manifestPath: string,
  pluginPath: readonly string[] = [],
): Promise<{ providers: ProviderPlugin[]; guardrails: GuardrailPlugin[] }> {
  const { folders, problems } = inspectPluginFolders(manifestPath, pluginPath);
  const providers: ProviderPlugin[] = [];
  const guardrails: GuardrailPlugin[] = [];
  for (const folder of folders) {
    try {
      const loaded = await loadFolder(folder);
      if (loaded.kind === 'provider') providers.push(loaded.plugin);
      else guardrails.push(loaded.guardrail);
    } catch (error) {
      if (!(error instanceof PluginLoadError)) throw error;
      problems.push(error);
    }
  }
  if (problems.length) throw PluginLoadError.combine(problems);
  return { providers, guardrails };
}
