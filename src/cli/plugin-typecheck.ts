import { existsSync, readdirSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';

/**
 * What every plugin is compiled with, by `plugin test` and by a plugin package's `tsconfig.json`: strict ES modules.
 */
const PLUGIN_COMPILER_OPTIONS = {
  target: 'ES2022',
  module: 'NodeNext',
  moduleResolution: 'NodeNext',
  strict: true,
  noUncheckedIndexedAccess: true,
  skipLibCheck: true,
  allowImportingTsExtensions: true,
  verbatimModuleSyntax: true,
  types: [],
} as const;

/**
 * The options `plugin test` type-checks plugins with, in memory (nothing is emitted): the strictness of
 * a plugin package's {@link pluginPackageCompilerOptions}, with `model-gateway/plugin` mapped to the
 * running gateway's own contract source, so that a plugins directory is checked with no install step.
 */
export function pluginCompilerOptions(contractFile: string): Record<string, unknown> {
  return { ...PLUGIN_COMPILER_OPTIONS, noEmit: true, paths: { 'model-gateway/plugin': [contractFile] } };
}

/**
 * The compiler options of the `tsconfig.json` `plugin new` writes for a plugin package: the contract's
 * types come from the installed package `model-gateway` (its `exports['./plugin'].types`), which the
 * compiler reads but never emits (a file of node_modules, even through npm's symlink to a checkout);
 * `<vendor>/*.ts` compile to `dist/<vendor>/*.js` (relative `./x.ts` imports become `./x.js`), and
 * nothing at all when a file does not type-check.
 */
export function pluginPackageCompilerOptions(): Record<string, unknown> {
  return {
    ...PLUGIN_COMPILER_OPTIONS,
    rewriteRelativeImportExtensions: true,
    rootDir: '.',
    outDir: 'dist',
    noEmitOnError: true,
  };
}

/** The TypeScript files of a plugin folder (fixtures aside). */
function typeScriptFiles(directory: string): string[] {
  return readdirSync(directory, { recursive: true, encoding: 'utf8' })
    .filter(
      (file) =>
        file.endsWith('.ts') &&
        !file.endsWith('.d.ts') &&
        !file.split(/[\\/]/).some((part) => part === 'node_modules' || part === '__fixtures__'),
    )
    .map((file) => join(directory, file));
}

/**
 * Type-checks the TypeScript plugin folders (strict, exact `definePlugin` fields) with the compiler the
 * gateway resolves. One line per error, `file(line,col): message`; `undefined` when there is nothing to
 * check or no compiler to check it with (a production install without typescript).
 */
export async function typeCheckPlugins(
  folders: readonly string[],
  contractFile: string,
): Promise<string[] | undefined> {
  const files = folders.filter((folder) => existsSync(folder)).flatMap(typeScriptFiles);
  if (files.length === 0) return undefined;
  let ts: typeof import('typescript');
  try {
    ts = (await import(createRequire(import.meta.url).resolve('typescript'))) as typeof import('typescript');
    ts = (ts as unknown as { default?: typeof ts }).default ?? ts;
  } catch {
    return undefined;
  }
  const { options, errors } = ts.convertCompilerOptionsFromJson(pluginCompilerOptions(contractFile), '/');
  if (errors.length) return errors.map((error) => ts.flattenDiagnosticMessageText(error.messageText, ' '));
  const program = ts.createProgram(files, options);
  return ts.getPreEmitDiagnostics(program).map((diagnostic) => {
    const text = ts.flattenDiagnosticMessageText(diagnostic.messageText, ' ');
    if (!diagnostic.file || diagnostic.start === undefined) return text;
    const { line, character } = diagnostic.file.getLineAndCharacterOfPosition(diagnostic.start);
    return `${diagnostic.file.fileName}(${line + 1},${character + 1}): ${text}`;
  });
}
