import { existsSync, readdirSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';

/**
 * The compiler options a plugin is type-checked with (the scaffold's `tsconfig.json` says the same):
 * strict, ES modules, and `model-gateway/plugin` mapped to the gateway's own contract source.
 */
export function pluginCompilerOptions(contractFile: string): Record<string, unknown> {
  return {
    target: 'ES2022',
    module: 'NodeNext',
    moduleResolution: 'NodeNext',
    strict: true,
    noUncheckedIndexedAccess: true,
    noEmit: true,
    skipLibCheck: true,
    allowImportingTsExtensions: true,
    verbatimModuleSyntax: true,
    types: [],
    paths: { 'model-gateway/plugin': [contractFile] },
  };
}

/** The TypeScript files of a plugin folder (fixtures aside). */
function typeScriptFiles(directory: string): string[] {
  return readdirSync(directory, { recursive: true, encoding: 'utf8' })
    .filter((file) => file.endsWith('.ts') && !file.endsWith('.d.ts') && !file.split(/[\\/]/).some((part) => part === 'node_modules' || part === '__fixtures__'))
    .map((file) => join(directory, file));
}

/**
 * Type-checks the TypeScript plugin folders (strict, exact `definePlugin` fields) with the compiler the
 * gateway resolves. One line per error, `file(line,col): message`; `undefined` when there is nothing to
 * check or no compiler to check it with (a production install without typescript).
 */
export async function typeCheckPlugins(folders: readonly string[], contractFile: string): Promise<string[] | undefined> {
  const files = folders.filter((folder) => existsSync(folder)).flatMap(typeScriptFiles);
  if (files.length === 0) return undefined;
  let ts: typeof import('typescript');
  try {
    ts = (await import(createRequire(import.meta.url).resolve('typescript'))) as typeof import('typescript');
    ts = ((ts as unknown as { default?: typeof ts }).default ?? ts);
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
