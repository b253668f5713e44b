import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { pathToFileURL } from 'node:url';
import type { ProviderPlugin } from './plugin-contract.ts';
import { PluginLoadError, validatePlugin } from './validate-plugin.ts';

/**
 * Reads the manifest (`{"plugins": ["<vendor>", ...]}`, catalog order) and imports each plugin from
 * `<manifest dir>/<vendor>/index.js` (compiled) or else `index.ts`, checking each whole. Throws {@link PluginLoadError} naming the
 * plugin and the bad field.
 */
export async function loadPlugins(manifestPath: string): Promise<ProviderPlugin[]> {
  let manifest: unknown;
  try {
    manifest = JSON.parse(readFileSync(manifestPath, 'utf8'));
  } catch (error) {
    throw new PluginLoadError('manifest', manifestPath, `cannot be read as JSON: ${(error as Error).message}`);
  }
  const names = (manifest as { plugins?: unknown }).plugins;
  if (!Array.isArray(names) || names.length === 0 || names.some((name) => typeof name !== 'string')) {
    throw new PluginLoadError('manifest', 'plugins', 'must be a non-empty list of plugin folder names');
  }
  const duplicate = names.find((name, index) => names.indexOf(name) !== index);
  if (duplicate) throw new PluginLoadError('manifest', 'plugins', `'${duplicate}' is listed twice`);

  const plugins: ProviderPlugin[] = [];
  for (const name of names as string[]) {
    if (!/^[a-z0-9][a-z0-9-]*$/.test(name)) throw new PluginLoadError(name, 'manifest entry', 'must be a folder name (lower case letters, digits, dashes)');
    let module: { default?: unknown };
    const compiled = join(dirname(manifestPath), name, 'index.js');
    const entry = existsSync(compiled) ? compiled : join(dirname(manifestPath), name, 'index.ts');
    try {
      module = (await import(pathToFileURL(entry).href)) as { default?: unknown };
    } catch (error) {
      throw new PluginLoadError(name, entry.endsWith('.js') ? 'index.js' : 'index.ts', `cannot be loaded: ${(error as Error).message}`);
    }
    plugins.push(validatePlugin(name, module.default));
  }
  return plugins;
}
