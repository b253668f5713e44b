// Part of `npm run build`: copies into dist/ every file the compiled gateway and CLI read at run time
// besides the compiled modules themselves, so that dist/ serves exactly what the source tree serves.
import { cpSync, readdirSync, existsSync, mkdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const copy = (path) => {
  mkdirSync(dirname(join(root, 'dist', path)), { recursive: true });
  cpSync(join(root, path), join(root, 'dist', path), { recursive: true });
};

// The account page's static files.
copy('web');
// The built-in plugins' manifest, and their recorded fixtures (`plugin test` replays them).
copy('providers/manifest.json');
for (const entry of readdirSync(join(root, 'providers'), { withFileTypes: true })) {
  if (entry.isDirectory() && existsSync(join(root, 'providers', entry.name, '__fixtures__')))
    copy(join('providers', entry.name, '__fixtures__'));
}
