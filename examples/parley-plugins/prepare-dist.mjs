// The first step of `npm run build` (tsc, the second, compiles <vendor>/*.ts to dist/<vendor>/*.js):
// empties dist/ and puts there what the gateway reads beside the compiled plugins, so that dist/ is a
// plugins directory of its own, JavaScript only, to copy anywhere: GATEWAY_PLUGIN_PATH=<this package>/dist.
//   dist/manifest.json   this package's manifest: the plugins to load, in catalog order
//   dist/package.json    {"type": "module"}: the compiled plugins are ES modules
//   dist/<vendor>/       every file of the plugin folder that is not TypeScript (__fixtures__, data files)
import { cpSync, existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = dirname(fileURLToPath(import.meta.url));
const dist = join(root, 'dist');
const { plugins } = JSON.parse(readFileSync(join(root, 'manifest.json'), 'utf8'));
rmSync(dist, { recursive: true, force: true });
mkdirSync(dist);
for (const vendor of plugins) {
  if (!existsSync(join(root, vendor))) {
    console.error(`manifest.json lists '${vendor}', but ${join(root, vendor)} does not exist`);
    process.exit(1);
  }
  cpSync(join(root, vendor), join(dist, vendor), { recursive: true, filter: (source) => !/\.[cm]?ts$/.test(source) });
}
cpSync(join(root, 'manifest.json'), join(dist, 'manifest.json'));
writeFileSync(join(dist, 'package.json'), `${JSON.stringify({ type: 'module' }, null, 2)}\n`);
