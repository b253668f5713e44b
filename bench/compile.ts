import { execFile } from 'node:child_process';
import { copyFile, mkdir, symlink, writeFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';

/** A source tree compiled for the benchmark: where its entry points are and how to run them. */
export interface CompiledTree {
  /** Node arguments before a script: resolves the plugins' `index.ts` imports to their compiled `.js`. */
  readonly nodeArgs: string[];
  readonly script: (path: string) => string;
  readonly manifest: string;
}

// Resolve hook: loadPlugins imports `<vendor>/index.ts`; in a compiled tree that file is `index.js`.
// Runs once per import, never per request.
const HOOK = `export async function resolve(specifier, context, next) {
  if (specifier.endsWith('.ts') && (specifier.startsWith('file:') || specifier.startsWith('.') || specifier.startsWith('/'))) {
    try { return await next(specifier.slice(0, -3) + '.js', context); } catch {}
  }
  return next(specifier, context);
}
`;

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
  await promisify(execFile)(join(here, 'node_modules/.bin/tsc'), ['-p', tsconfig], { cwd: source });
  await writeFile(join(out, 'package.json'), '{"type":"module"}\n');
  await symlink(join(here, 'node_modules'), join(out, 'node_modules')).catch((error: NodeJS.ErrnoException) => {
    if (error.code !== 'EEXIST') throw error;
  });
  await copyFile(join(source, 'providers/manifest.json'), join(out, 'providers/manifest.json'));
  await writeFile(join(out, 'ts-to-js-hook.mjs'), HOOK);
  await writeFile(join(out, 'ts-to-js.mjs'), "import { register } from 'node:module';\nregister('./ts-to-js-hook.mjs', import.meta.url);\n");
  return {
    nodeArgs: ['--import', join(out, 'ts-to-js.mjs')],
    script: (path) => join(out, path.replace(/\.ts$/, '.js')),
    manifest: join(out, 'providers/manifest.json'),
  };
}
