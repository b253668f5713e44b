import { existsSync, mkdirSync, readFileSync, realpathSync, writeFileSync } from 'node:fs';
import { basename, dirname, join, relative, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { formatFailure, runConformance, type ConformanceOptions } from '../../tools/conformance/run-conformance.ts';
import { checkLiveVendor } from '../../tools/conformance/live-vendor-check.ts';
import { loadPluginFolder, PLUGIN_ENTRY_FILES, pluginFolders, readManifest } from '../plugins/load-plugins.ts';
import { typeCheckPlugins } from './plugin-typecheck.ts';
import { CliUsageError, type CliIo } from './cli-io.ts';
import { adapterScaffoldFiles } from './adapter-scaffold.ts';
import {
  envPrefix,
  guardrailScaffoldFiles,
  packageFiles,
  packageName,
  SCAFFOLD_FORMATS,
  scaffoldFiles,
  type ScaffoldFormat,
} from './plugin-scaffold.ts';

export const PLUGIN_SYNOPSIS = `plugin new VENDOR [--format chat-completions|messages|responses | --adapter (a vendor with a wire format of its own, served on /v1/chat/completions and /v1/chat through a route adapter; source maps on in a new package)] [--dir PLUGINS_DIR (default: providers/; outside the repository, an npm package whose npm run build writes PLUGINS_DIR/dist)]
plugin new NAME --guardrail [--dir PLUGINS_DIR]   (a guardrail plugin: a check on prompts and answers, turned on by the config file's guardrails:)
plugin test DIR [--verbose] [--upstream URL --key KEY]   (a plugins directory with a manifest.json, or one plugin folder; type-checked first, then tested beside GATEWAY_PLUGIN_PATH's plugins; a plugin fault's log line is shown with it, every log line of the gateway under test with --verbose; with --upstream, one minimal request per declared route to that live vendor, whatever the suite found, reporting path, auth and format mismatches)`;

// The checkout this command belongs to, whether it runs from source (src/cli/) or compiled (dist/src/cli/):
// plugins are written and tested as TypeScript source in its providers/, importing the contract's source.
const CHECKOUT = fileURLToPath(new URL(import.meta.url.endsWith('.ts') ? '../../' : '../../../', import.meta.url));
/** The repository's own plugins directory, wherever the command is run from. */
const REPOSITORY_PLUGINS = join(CHECKOUT, 'providers');
const CONTRACT_FILE = join(CHECKOUT, 'src', 'plugins', 'plugin-contract.ts');

/** The manifest of the built-in plugins: `GATEWAY_MANIFEST`, else the repository's. */
const builtInManifest = (env: NodeJS.ProcessEnv) =>
  resolve(env.GATEWAY_MANIFEST ?? join(REPOSITORY_PLUGINS, 'manifest.json'));

export async function runPluginCommand(argv: string[], io: CliIo, env: NodeJS.ProcessEnv): Promise<number> {
  const [action, ...rest] = argv;
  if (action === 'new') return newPlugin(rest, io, env);
  if (action === 'test') return testPlugins(rest, io, env);
  throw new CliUsageError(action ? `Unknown plugin command '${action}'.` : 'Missing plugin command.');
}

function newPlugin(argv: string[], io: CliIo, env: NodeJS.ProcessEnv): number {
  const { values, positionals } = parseArgs({
    args: argv,
    options: {
      format: { type: 'string' },
      dir: { type: 'string' },
      guardrail: { type: 'boolean' },
      adapter: { type: 'boolean' },
    },
    strict: true,
    allowPositionals: true,
  });
  const guardrail = values.guardrail === true;
  if (positionals.length !== 1)
    throw new CliUsageError(`plugin new takes one ${guardrail ? 'guardrail' : 'vendor'} name.`);
  const formatGiven = values.format;
  const adapted = values.adapter === true;
  if (guardrail && formatGiven !== undefined)
    throw new CliUsageError('--format is for provider plugins: a guardrail reads every format.');
  if (guardrail && adapted) {
    throw new CliUsageError('--adapter is for provider plugins: a guardrail reads every format.');
  }
  if (adapted && formatGiven !== undefined && formatGiven !== 'chat-completions') {
    throw new CliUsageError(
      '--adapter writes a Chat Completions adapter (the route most clients speak); adapters of Messages or ' +
        'Responses start from it (docs/plugins.md, "Route adapters").',
    );
  }
  const vendor = positionals[0]!;
  const format = (values.format ?? 'chat-completions') as ScaffoldFormat;
  if (!SCAFFOLD_FORMATS.includes(format))
    throw new CliUsageError(`--format must be one of ${SCAFFOLD_FORMATS.join(', ')}, got '${values.format}'.`);
  if (!/^[a-z][a-z0-9]*(?:-[a-z0-9]+)*$/.test(vendor)) {
    const example = guardrail ? 'acme-tickets' : 'acme or acme-cloud';
    io.err(
      `Invalid ${guardrail ? 'guardrail' : 'vendor'} name '${vendor}': use lower case letters, digits and single dashes, starting with a letter (e.g. ${example}).\n`,
    );
    return 1;
  }
  // Without --dir, beside the gateway's own manifest (GATEWAY_MANIFEST, else the repository's providers/).
  const pluginsDir = resolve(values.dir ?? dirname(builtInManifest(env)));
  const manifestPath = join(pluginsDir, 'manifest.json');
  const folder = join(pluginsDir, vendor);
  const builtIn = builtInManifest(env);
  const taken = [manifestPath, builtIn]
    .filter((path, index, all) => all.indexOf(path) === index && existsSync(path))
    .find((path) => (JSON.parse(readFileSync(path, 'utf8')) as { plugins?: unknown[] }).plugins?.includes(vendor));
  if (taken) {
    io.err(`Vendor '${vendor}' exists already: ${taken} lists it. Pick another name.\n`);
    return 1;
  }
  if (existsSync(folder)) {
    io.err(`Vendor '${vendor}' exists already: ${folder} is there. Pick another name or remove the folder.\n`);
    return 1;
  }

  // Inside the repository a plugin imports the contract by path, as its siblings do; elsewhere by package name.
  const inRepository = pluginsDir === resolve(REPOSITORY_PLUGINS);
  const contractImport = inRepository ? relative(folder, CONTRACT_FILE).split(sep).join('/') : 'model-gateway/plugin';
  const manifest = existsSync(manifestPath)
    ? (JSON.parse(readFileSync(manifestPath, 'utf8')) as { plugins?: string[] })
    : {};
  const files = guardrail
    ? guardrailScaffoldFiles({ name: vendor, contractImport })
    : adapted
      ? adapterScaffoldFiles({ vendor, contractImport })
      : scaffoldFiles({ vendor, format, contractImport });
  for (const [path, content] of Object.entries(files)) {
    mkdirSync(dirname(join(folder, path)), { recursive: true });
    writeFileSync(join(folder, path), content);
  }
  writeFileSync(
    manifestPath,
    `${JSON.stringify({ ...manifest, plugins: [...(manifest.plugins ?? []), vendor] }, null, 2)}\n`,
  );
  // Outside the gateway's checkout, a plugins directory without a package.json becomes a plugin package (an
  // existing package.json, tsconfig.json… is left as it is): built to dist/ against the installed gateway's
  // contract, never against a path into a checkout, so the compiler writes nothing outside the package.
  const packageJson = join(pluginsDir, 'package.json');
  const written =
    !`${realpathSync(pluginsDir)}${sep}`.startsWith(CHECKOUT) && !existsSync(packageJson)
      ? Object.entries(
          packageFiles({
            name: packageName(basename(pluginsDir)),
            gateway: `file:${relative(pluginsDir, CHECKOUT).split(sep).join('/') || '.'}`,
            typescript: gatewayTypeScript(),
            sourceMaps: adapted,
          }),
        ).filter(([path]) => !existsSync(join(pluginsDir, path)))
      : [];
  for (const [path, content] of written) writeFileSync(join(pluginsDir, path), content);
  const packaged = typeof packageScripts(packageJson).build === 'string';

  const prefix = envPrefix(vendor);
  if (guardrail) {
    io.out(
      guardrailNextSteps(
        vendor,
        folder,
        files,
        manifestPath,
        pluginsDir,
        written.map(([path]) => path),
        packaged,
        values.dir !== undefined,
      ),
    );
    return 0;
  }
  const tsconfig = join(pluginsDir, 'tsconfig.json');
  const mapsSource = (path: string) => /"sourceMap"\s*:\s*true/.test(readFileSync(path, 'utf8'));
  const withoutSourceMaps = adapted && packaged && existsSync(tsconfig) && !mapsSource(tsconfig);
  io.out(
    [
      `Created ${folder}/ (${adapted ? "a route adapter: the vendor's own format on chat-completions" : format}):`,
      ...Object.keys(files).map((path) => `  ${vendor}/${path}`),
      `Added '${vendor}' to ${manifestPath} (last in the catalog).`,
      ...(written.length
        ? [
            `Wrote ${written.map(([path]) => path).join(', ')} in ${pluginsDir}: a plugin package, built to dist/ (docs/plugins.md, "Plugin packages").`,
          ]
        : []),
      ...(written.some(([path]) => path === 'package.json') && !written.some(([path]) => path === 'tsconfig.json')
        ? [
            `Kept ${join(pluginsDir, 'tsconfig.json')}: npm run build needs it to compile to dist/ (rootDir ".", outDir "dist", no noEmit, no paths into a checkout).`,
          ]
        : []),
      ...(withoutSourceMaps
        ? [
            `Add "sourceMap": true to the compilerOptions of ${tsconfig}: ` +
              "a fault's stack then names your TypeScript lines.",
          ]
        : []),
      '',
      'Next:',
      ...[
        adapted
          ? `Edit ${join(folder, 'vendor-wire.ts')} and ${join(folder, 'chat-completions.ts')}: ` +
            "the vendor's request, answer, " +
            `stream events, errors and usage; then ${join(folder, 'index.ts')}: path, auth, models, prices ` +
            '(guide: docs/plugins.md, "Route adapters").'
          : `Edit ${join(folder, 'index.ts')}: models, prices, alias (guide: docs/plugins.md).`,
        ...(adapted
          ? [
              `Record real answers of the vendor into ${join(folder, '__fixtures__')}/ (a JSON answer and a stream, ` +
                'with their usage): plugin test answers with them',
            ]
          : []),
        ...(packaged
          ? [
              `npm install in ${pluginsDir}: typescript, and this gateway for the contract's types (package.json links ${resolve(CHECKOUT)}; or npm install <a model-gateway .tgz of npm pack>)`,
              `npm run typecheck, then npm run build: ${join(pluginsDir, 'dist')}/ holds the plugins as JavaScript, with the manifest`,
            ]
          : []),
        `npx model-gateway plugin test ${folder}`,
        ...(values.dir
          ? [`Run the gateway with GATEWAY_PLUGIN_PATH=${packaged ? join(pluginsDir, 'dist') : pluginsDir}`]
          : []),
        `Point it at the provider: ${prefix}_BASE_URL=https://… (with the version prefix) ${prefix}_API_KEY=…`,
      ].map((step, index) => `  ${index + 1}. ${step}`),
      '',
    ].join('\n'),
  );
  return 0;
}

/** What `plugin new --guardrail` did, and what to do next. */
function guardrailNextSteps(
  name: string,
  folder: string,
  files: Record<string, string>,
  manifestPath: string,
  pluginsDir: string,
  written: readonly string[],
  packaged: boolean,
  outside: boolean,
): string {
  return [
    `Created ${folder}/ (a guardrail plugin):`,
    ...Object.keys(files).map((path) => `  ${name}/${path}`),
    `Added '${name}' to ${manifestPath}.`,
    ...(written.length
      ? [
          `Wrote ${written.join(', ')} in ${pluginsDir}: a plugin package, built to dist/ (docs/plugins.md, "Plugin packages").`,
        ]
      : []),
    '',
    'Next:',
    ...[
      `Edit ${join(folder, 'index.ts')}: what scan finds, and maxFindingChars (guide: docs/guardrails.md).`,
      `Edit the examples in ${join(folder, '__fixtures__')}/*.guardrail.json: texts and what scan must find in them.`,
      ...(packaged
        ? [
            `npm install in ${pluginsDir}, then npm run typecheck and npm run build: ${join(pluginsDir, 'dist')}/ holds it as JavaScript`,
          ]
        : []),
      `npx model-gateway plugin test ${folder}`,
      ...(outside
        ? [`Run the gateway with GATEWAY_PLUGIN_PATH=${packaged ? join(pluginsDir, 'dist') : pluginsDir}`]
        : []),
      `Turn it on in the config file: guardrails: [{ name: ${name}, use: ${name}, on: both, action: block }]`,
    ].map((step, index) => `  ${index + 1}. ${step}`),
    '',
  ].join('\n');
}

/** The `scripts` of a package.json, none when there is none or it cannot be read. */
function packageScripts(path: string): Record<string, unknown> {
  try {
    return (JSON.parse(readFileSync(path, 'utf8')) as { scripts?: Record<string, unknown> }).scripts ?? {};
  } catch {
    return {};
  }
}

/** The typescript the gateway is built with (its package.json), for a plugin package's devDependencies. */
function gatewayTypeScript(): string {
  try {
    const own = JSON.parse(readFileSync(join(CHECKOUT, 'package.json'), 'utf8')) as {
      devDependencies?: Record<string, string>;
    };
    return own.devDependencies?.typescript ?? '^5.9.0';
  } catch {
    return '^5.9.0';
  }
}

async function testPlugins(argv: string[], io: CliIo, env: NodeJS.ProcessEnv): Promise<number> {
  const { positionals, values } = parseArgs({
    args: argv,
    options: { upstream: { type: 'string' }, key: { type: 'string' }, verbose: { type: 'boolean' } },
    strict: true,
    allowPositionals: true,
  });
  // A compiled plugin's faults then name its TypeScript lines (where its package writes source maps).
  process.setSourceMapsEnabled(true);
  if (positionals.length !== 1) throw new CliUsageError('plugin test takes one directory.');
  if ((values.upstream === undefined) !== (values.key === undefined))
    throw new CliUsageError("--upstream and --key go together: the live vendor's base URL and a key for it.");
  const directory = resolve(positionals[0]!);
  const builtIn = builtInManifest(env);
  // The plugins the gateway would load beside it (GATEWAY_PLUGIN_PATH), so that collisions show here, not at start-up.
  const configured = (env.GATEWAY_PLUGIN_PATH ?? '')
    .split(':')
    .filter(Boolean)
    .map((path) => resolve(path));
  const withConfigured = (tested: string) => [...configured.filter((path) => path !== tested), tested];
  let options: ConformanceOptions;
  if (existsSync(join(directory, 'manifest.json'))) {
    const manifest = join(directory, 'manifest.json');
    options =
      manifest === builtIn
        ? { manifestPath: builtIn, pluginPath: configured }
        : {
            manifestPath: builtIn,
            pluginPath: withConfigured(directory),
            vendors: readManifest(manifest).map((folder) => folder.name),
          };
  } else if (PLUGIN_ENTRY_FILES.some((file) => existsSync(join(directory, file)))) {
    const manifest = join(dirname(directory), 'manifest.json');
    const vendor = basename(directory);
    if (!existsSync(manifest) || !readManifest(manifest).some((folder) => folder.name === vendor)) {
      io.err(`No manifest lists '${vendor}': add it to ${manifest} ({"plugins": [..., "${vendor}"]}).\n`);
      return 1;
    }
    options =
      manifest === builtIn
        ? { manifestPath: builtIn, pluginPath: configured, vendors: [vendor] }
        : { manifestPath: builtIn, pluginPath: withConfigured(dirname(directory)), vendors: [vendor] };
  } else {
    io.err(`${directory} holds neither a manifest.json nor a plugin (${PLUGIN_ENTRY_FILES.join(', ')}).\n`);
    return 1;
  }

  // Type-check first: a misspelled field or a wrong type is a compile error with a line number.
  if (options.vendors && options.pluginPath?.length) {
    const tested = pluginFolders(options.manifestPath, options.pluginPath).filter(
      (folder) => options.vendors!.includes(folder.name) && folder.manifestPath !== builtIn,
    );
    const errors = await typeCheckPlugins(
      tested.map((folder) => folder.directory),
      CONTRACT_FILE,
    );
    if (errors?.length) {
      io.out(`✘ type check: ${errors.length} error(s)\n${errors.map((error) => `    ${error}\n`).join('')}`);
      return 1;
    }
    if (errors) io.out(`✔ type check: ${tested.map((folder) => folder.name).join(', ')}\n`);
  }
  const log = (line: string) => io.out(`  log ${line}\n`);
  const report = await runConformance(values.verbose ? { ...options, log } : options);
  for (const failure of report.failures) io.out(`✘ ${formatFailure(failure)}\n`);
  for (const plugin of report.plugins) {
    if (plugin.failures.length === 0) {
      io.out(`✔ ${plugin.vendor}: ${plugin.checks} checks passed (${plugin.directory})\n`);
      for (const note of plugin.notes) io.out(`    ${note}\n`);
    } else {
      io.out(
        `✘ ${plugin.vendor}: ${plugin.failures.length} failure(s) in ${plugin.checks} checks (${plugin.directory})\n`,
      );
      for (const failure of plugin.failures) io.out(`    ${formatFailure(failure)}\n`);
    }
  }
  if (values.upstream === undefined) return report.ok ? 0 : 1;
  // The live vendor is asked whatever the suite found: it tells what the mock cannot.
  const live = await checkAgainstVendor(options, values.upstream, values.key!, io);
  return report.ok && live ? 0 : 1;
}

/** `--upstream URL --key KEY`: one minimal request per declared route of the tested plugins, to the live vendor. */
async function checkAgainstVendor(
  options: ConformanceOptions,
  baseUrl: string,
  key: string,
  io: CliIo,
): Promise<boolean> {
  const folders = pluginFolders(options.manifestPath, options.pluginPath ?? []).filter((folder) =>
    options.vendors ? options.vendors.includes(folder.name) : true,
  );
  const plugins = await Promise.all(folders.map((folder) => loadPluginFolder(folder)));
  const results = await checkLiveVendor(plugins, baseUrl, key);
  for (const result of results) {
    const route = `route '${result.route}'${result.mode ? ` (${result.mode === 'stream' ? 'stream' : 'JSON'})` : ''}`;
    const verdict = result.verdict === 'ok' ? '' : `${result.verdict} mismatch: `;
    const mark = result.verdict === 'ok' ? '✔' : '✘';
    io.out(`${mark} live ${result.plugin}, ${route} (${result.path}): ${verdict}${result.detail}\n`);
  }
  return results.every((result) => result.verdict === 'ok');
}
