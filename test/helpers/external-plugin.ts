import { lstat, mkdir, symlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));

/** A compiled (JavaScript) plugin in a directory outside the repository, importing the contract by package name. */
export async function writeJavaScriptPlugin(directory: string): Promise<void> {
  await mkdir(join(directory, 'sigma'), { recursive: true });
  await mkdir(join(directory, 'node_modules'));
  await symlink(ROOT, join(directory, 'node_modules', 'model-gateway'), 'dir');
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


/** The kappa fixture plugins (compiled JavaScript, outside providers/): kappa (`auth: { header: 'x-kappa-key' }`) and kappaq (`auth: { query: 'key' }`). */
export const KAPPA_DIR = join(ROOT, 'test/fixtures/kappa-plugin');

/** Links `node_modules/model-gateway` in the kappa fixture directory to this gateway, as `npm install <gateway>` would. */
export async function linkKappaPlugin(): Promise<string> {
  const link = join(KAPPA_DIR, 'node_modules', 'model-gateway');
  try {
    await lstat(link);
  } catch {
    await mkdir(join(KAPPA_DIR, 'node_modules'), { recursive: true });
    await symlink(ROOT, link, 'dir');
  }
  return KAPPA_DIR;
}
