import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));

/**
 * A compiled (JavaScript) plugin in a directory outside the repository, importing the contract by package name, with no
 * install step.
 */
export async function writeJavaScriptPlugin(directory: string): Promise<void> {
  await mkdir(join(directory, 'sigma'), { recursive: true });
  // No node_modules: the gateway maps model-gateway/plugin to its own contract when it loads the plugin.
  await writeFile(join(directory, 'package.json'), JSON.stringify({ private: true, type: 'module' }));
  await writeFile(join(directory, 'manifest.json'), JSON.stringify({ plugins: ['sigma'] }));
  await writeFile(
    join(directory, 'sigma', 'index.js'),
    `import { definePlugin } from 'model-gateway/plugin';
export default definePlugin({
  contract: 1,
  vendor: 'sigma',
  routes: { 'chat-completions': { path: '/chat/completions', format: 'chat-completions', auth: 'bearer' } },
  models: [{ id: 'sigma-2', upstreamModel: 'sigma-2-2026', listed: true, routes: ['chat-completions'], pricing: { input: 1, cachedInput: 0.1, output: 3 } }],
});
`,
  );
}

/**
 * The kappa fixture plugins (compiled JavaScript, outside providers/): kappa (`auth: { header: 'x-kappa-key' }`) and
 * kappaq (`auth: { query: 'key' }`).
 */
export const KAPPA_DIR = join(ROOT, 'test/fixtures/kappa-plugin');
