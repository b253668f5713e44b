import { copyFile, mkdir, readFile, symlink, writeFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { runTracked } from './processes.ts';

/** A source tree compiled for the benchmark: where its entry points are and how to run them. */
export interface CompiledTree {
  /** Node arguments before a script (none: plain `node`). */
  readonly nodeArgs: string[];
  readonly script: (path: string) => string;
  readonly manifest: string;
}

/**
 * Compiles a gateway source tree (`src`, `providers`, `mock-upstream`, `scripts`, `bench`) with tsc into
 * `outDir`, rewriting the `.ts` import extensions, so that the benchmark measures `node` running
 * JavaScript, as production does, rather than tsx's loader and wrappers. The tree's dependencies are
 * taken from this checkout's `node_modules`.
 */
export async function compileTree(sourceDir: string, outDir: string): Promise<CompiledTree> {
  const source = resolve(sourceDir);
  const out = resolve(outDir);
  const here = resolve('.');
  await mkdir(out, { recursive: true });
  // A tree without its own dependencies (an exported older commit) type-checks against this checkout's.
  await symlink(join(here, 'node_modules'), join(source, 'node_modules')).catch((error: NodeJS.ErrnoException) => {
    if (error.code !== 'EEXIST') throw error;
  });
  const tsconfig = join(out, 'tsconfig.bench.json');
  await writeFile(
    tsconfig,
    JSON.stringify({
      extends: join(source, 'tsconfig.json'),
      compilerOptions: {
        noEmit: false,
        outDir: out,
        rootDir: source,
        rewriteRelativeImportExtensions: true,
        sourceMap: false,
        types: ['node'],
        typeRoots: [join(here, 'node_modules/@types')],
      },
      include: ['src', 'providers', 'mock-upstream', 'scripts', 'bench'].map((folder) => join(source, folder)),
    }),
  );
  // Tracked like every process of the benchmark: stopping the benchmark mid-compile stops tsc too.
  await runTracked(join(here, 'node_modules/.bin/tsc'), ['-p', tsconfig], { cwd: source });
  await writeFile(join(out, 'package.json'), '{"type":"module"}\n');
  await symlink(join(here, 'node_modules'), join(out, 'node_modules')).catch((error: NodeJS.ErrnoException) => {
    if (error.code !== 'EEXIST') throw error;
  });
  await copyFile(join(source, 'providers/manifest.json'), join(out, 'providers/manifest.json'));
  // The plugin loader imports `<vendor>/index.ts`, which is `index.js` once compiled. Rewritten in the
  // output rather than with a resolve hook: Node 20 runs hooks on a thread of their own, whose memory
  // would count to every process measured.
  const loader = join(out, 'src/plugins/load-plugins.js');
  await writeFile(loader, (await readFile(loader, 'utf8')).replaceAll("'index.ts'", "'index.js'"));
  return {
    nodeArgs: [],
    script: (path) => join(out, path.replace(/\.ts$/, '.js')),
    manifest: join(out, 'providers/manifest.json'),
  };
}
