import { execFile } from 'node:child_process';
import { existsSync, lstatSync, mkdirSync, symlinkSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));

/** The folder of an example package under examples/. */
export const examplePackage = (name: string) => join(ROOT, 'examples', name);

/**
 * Builds an example plugin package as its own `npm run build` does (its prepare-dist.mjs, then tsc with
 * its tsconfig.json), with the gateway as its `model-gateway` devDependency linked where `npm install`
 * of its `file:` dependency would link it, and the checkout's typescript: no install, no network.
 * Returns its `dist/`, what `GATEWAY_PLUGIN_PATH` names.
 */
export async function buildExample(name: string): Promise<string> {
  const directory = examplePackage(name);
  const modules = join(directory, 'node_modules');
  const link = join(modules, 'model-gateway');
  if (!existsSync(link) && !isLink(link)) {
    mkdirSync(modules, { recursive: true });
    symlinkSync('../../..', link, 'dir');
  }
  const run = async (file: string, args: string[]) => {
    try {
      await promisify(execFile)(file, args, { cwd: directory });
    } catch (error) {
      const { stdout, stderr } = error as { stdout?: string; stderr?: string };
      throw new Error(`${[file, ...args].join(' ')} failed in ${directory}:\n${stdout ?? ''}${stderr ?? ''}`);
    }
  };
  await run(process.execPath, ['prepare-dist.mjs']);
  await run(process.execPath, [join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', 'tsconfig.json']);
  return join(directory, 'dist');
}

function isLink(path: string): boolean {
  try {
    return lstatSync(path).isSymbolicLink();
  } catch {
    return false;
  }
}
