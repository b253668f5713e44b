import { existsSync, mkdirSync, readFileSync, realpathSync, writeFileSync } from 'node:fs';
import { basename, dirname, join, relative, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import {
  formatFailure,
  runConformance,
  type ConformanceOptions,
  type ConformanceReport,
} from '../../tools/conformance/run-conformance.ts';
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
  type ScaffoldFiles,
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

/** What `plugin new` is asked to write. */
interface NewPluginArgs {
  /** The vendor's name, or the guardrail's. */
  readonly name: string;
  readonly guardrail: boolean;
  /** A provider served through a route adapter (`--adapter`). */
  readonly adapted: boolean;
  readonly format: ScaffoldFormat;
  /** `--dir`, when given. */
  readonly dir: string | undefined;
}

/** The arguments of `plugin new`, refusing a combination that makes no plugin. */
function parseNewPluginArgs(argv: string[]): NewPluginArgs {
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
  const format = (values.format ?? 'chat-completions') as ScaffoldFormat;
  if (!SCAFFOLD_FORMATS.includes(format))
    throw new CliUsageError(`--format must be one of ${SCAFFOLD_FORMATS.join(', ')}, got '${values.format}'.`);
  return { name: positionals[0]!, guardrail, adapted, format, dir: values.dir };
}

/** Why a plugin name is refused: it is not lower-case-letters-digits-and-dashes; undefined when it is. */
function invalidName(name: string, guardrail: boolean): string | undefined {
  if (/^[a-z][a-z0-9]*(?:-[a-z0-9]+)*$/.test(name)) return undefined;
  const example = guardrail ? 'acme-tickets' : 'acme or acme-cloud';
  return `Invalid ${guardrail ? 'guardrail' : 'vendor'} name '${name}': use lower case letters, digits and single dashes, starting with a letter (e.g. ${example}).\n`;
}

/** Why the name is taken: the plugins directory's manifest or the built-in one lists it, or its folder is there. */
function nameTaken(name: string, manifestPath: string, builtIn: string, folder: string): string | undefined {
  const listing = [manifestPath, builtIn]
    .filter((path, index, all) => all.indexOf(path) === index && existsSync(path))
    .find((path) => (JSON.parse(readFileSync(path, 'utf8')) as { plugins?: unknown[] }).plugins?.includes(name));
  if (listing) return `Vendor '${name}' exists already: ${listing} lists it. Pick another name.\n`;
  if (existsSync(folder))
    return `Vendor '${name}' exists already: ${folder} is there. Pick another name or remove the folder.\n`;
  return undefined;
}

/** The files of the new plugin's folder, importing the contract as `contractImport`. */
function newPluginFiles({ name, guardrail, adapted, format }: NewPluginArgs, contractImport: string): ScaffoldFiles {
  if (guardrail) return guardrailScaffoldFiles({ name, contractImport });
  if (adapted) return adapterScaffoldFiles({ vendor: name, contractImport });
  return scaffoldFiles({ vendor: name, format, contractImport });
}

/** Writes the plugin's folder, and lists the plugin last in the manifest (which it creates when there is none). */
function writePlugin(folder: string, files: ScaffoldFiles, manifestPath: string, name: string): void {
  const manifest = existsSync(manifestPath)
    ? (JSON.parse(readFileSync(manifestPath, 'utf8')) as { plugins?: string[] })
    : {};
  for (const [path, content] of Object.entries(files)) {
    mkdirSync(dirname(join(folder, path)), { recursive: true });
    writeFileSync(join(folder, path), content);
  }
  writeFileSync(
    manifestPath,
    `${JSON.stringify({ ...manifest, plugins: [...(manifest.plugins ?? []), name] }, null, 2)}\n`,
  );
}

/**
 * Outside the gateway's checkout, a plugins directory without a package.json becomes a plugin package (an
 * existing package.json, tsconfig.json… is left as it is): built to dist/ against the installed gateway's
 * contract, never against a path into a checkout, so the compiler writes nothing outside the package.
 * Returns the paths written.
 */
function writePackage(pluginsDir: string, sourceMaps: boolean): string[] {
  if (`${realpathSync(pluginsDir)}${sep}`.startsWith(CHECKOUT) || existsSync(join(pluginsDir, 'package.json')))
    return [];
  const files = packageFiles({
    name: packageName(basename(pluginsDir)),
    gateway: `file:${relative(pluginsDir, CHECKOUT).split(sep).join('/') || '.'}`,
    typescript: gatewayTypeScript(),
    sourceMaps,
  });
  const written = Object.entries(files).filter(([path]) => !existsSync(join(pluginsDir, path)));
  for (const [path, content] of written) writeFileSync(join(pluginsDir, path), content);
  return written.map(([path]) => path);
}

/** What `plugin new` wrote, for the report of it. */
interface NewPlugin {
  readonly args: NewPluginArgs;
  readonly folder: string;
  readonly files: ScaffoldFiles;
  readonly manifestPath: string;
  readonly pluginsDir: string;
  /** The plugin package's files written in the plugins directory. */
  readonly written: readonly string[];
  /** Whether the plugins directory is a package with a build script. */
  readonly packaged: boolean;
}

function newPlugin(argv: string[], io: CliIo, env: NodeJS.ProcessEnv): number {
  const args = parseNewPluginArgs(argv);
  const invalid = invalidName(args.name, args.guardrail);
  if (invalid) {
    io.err(invalid);
    return 1;
  }
  const builtIn = builtInManifest(env);
  // Without --dir, beside the gateway's own manifest (GATEWAY_MANIFEST, else the repository's providers/).
  const pluginsDir = resolve(args.dir ?? dirname(builtIn));
  const manifestPath = join(pluginsDir, 'manifest.json');
  const folder = join(pluginsDir, args.name);
  const taken = nameTaken(args.name, manifestPath, builtIn, folder);
  if (taken) {
    io.err(taken);
    return 1;
  }
  // Inside the repository a plugin imports the contract by path, as its siblings do; elsewhere by package name.
  const inRepository = pluginsDir === resolve(REPOSITORY_PLUGINS);
  const contractImport = inRepository ? relative(folder, CONTRACT_FILE).split(sep).join('/') : 'model-gateway/plugin';
  const files = newPluginFiles(args, contractImport);
  writePlugin(folder, files, manifestPath, args.name);
  const written = writePackage(pluginsDir, args.adapted);
  const packaged = typeof packageScripts(join(pluginsDir, 'package.json')).build === 'string';
  const plugin = { args, folder, files, manifestPath, pluginsDir, written, packaged };
  io.out(args.guardrail ? guardrailNextSteps(plugin) : providerNextSteps(plugin));
  return 0;
}

/** Steps as the report numbers them. */
const numbered = (steps: readonly string[]) => steps.map((step, index) => `  ${index + 1}. ${step}`);

/** The line naming the plugin package's files, when some were written. */
const packageWritten = ({ written, pluginsDir }: NewPlugin) =>
  written.length
    ? [
        `Wrote ${written.join(', ')} in ${pluginsDir}: a plugin package, built to dist/ (docs/plugins.md, "Plugin packages").`,
      ]
    : [];

/** The step pointing the gateway at the plugins: their directory, or its dist/ in a package. */
const pluginPathStep = ({ pluginsDir, packaged }: NewPlugin) =>
  `Run the gateway with GATEWAY_PLUGIN_PATH=${packaged ? join(pluginsDir, 'dist') : pluginsDir}`;

/** What `plugin new` did for a provider, and what to do next. */
function providerNextSteps(plugin: NewPlugin): string {
  const { args, folder, files, manifestPath, pluginsDir, written } = plugin;
  const tsconfig = join(pluginsDir, 'tsconfig.json');
  const mapsSource = (path: string) => /"sourceMap"\s*:\s*true/.test(readFileSync(path, 'utf8'));
  const withoutSourceMaps = args.adapted && plugin.packaged && existsSync(tsconfig) && !mapsSource(tsconfig);
  return [
    `Created ${folder}/ (${args.adapted ? "a route adapter: the vendor's own format on chat-completions" : args.format}):`,
    ...Object.keys(files).map((path) => `  ${args.name}/${path}`),
    `Added '${args.name}' to ${manifestPath} (last in the catalog).`,
    ...packageWritten(plugin),
    ...(written.includes('package.json') && !written.includes('tsconfig.json')
      ? [
          `Kept ${tsconfig}: npm run build needs it to compile to dist/ (rootDir ".", outDir "dist", no noEmit, no paths into a checkout).`,
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
    ...numbered(providerSteps(plugin)),
    '',
  ].join('\n');
}

/** The next steps for a provider: edit, record (an adapter), build (a package), test, run, point at the vendor. */
function providerSteps(plugin: NewPlugin): string[] {
  const { args, folder, pluginsDir, packaged } = plugin;
  const prefix = envPrefix(args.name);
  return [
    args.adapted
      ? `Edit ${join(folder, 'vendor-wire.ts')} and ${join(folder, 'chat-completions.ts')}: ` +
        "the vendor's request, answer, " +
        `stream events, errors and usage; then ${join(folder, 'index.ts')}: path, auth, models, prices ` +
        '(guide: docs/plugins.md, "Route adapters").'
      : `Edit ${join(folder, 'index.ts')}: models, prices, alias (guide: docs/plugins.md).`,
    ...(args.adapted
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
    ...(args.dir ? [pluginPathStep(plugin)] : []),
    `Point it at the provider: ${prefix}_BASE_URL=https://… (with the version prefix) ${prefix}_API_KEY=…`,
  ];
}

/** What `plugin new --guardrail` did, and what to do next. */
function guardrailNextSteps(plugin: NewPlugin): string {
  const { args, folder, files, manifestPath, pluginsDir, packaged } = plugin;
  const { name } = args;
  return [
    `Created ${folder}/ (a guardrail plugin):`,
    ...Object.keys(files).map((path) => `  ${name}/${path}`),
    `Added '${name}' to ${manifestPath}.`,
    ...packageWritten(plugin),
    '',
    'Next:',
    ...numbered([
      `Edit ${join(folder, 'index.ts')}: what scan finds, and maxFindingChars (guide: docs/guardrails.md).`,
      `Edit the examples in ${join(folder, '__fixtures__')}/*.guardrail.json: texts and what scan must find in them.`,
      ...(packaged
        ? [
            `npm install in ${pluginsDir}, then npm run typecheck and npm run build: ${join(pluginsDir, 'dist')}/ holds it as JavaScript`,
          ]
        : []),
      `npx model-gateway plugin test ${folder}`,
      ...(args.dir !== undefined ? [pluginPathStep(plugin)] : []),
      `Turn it on in the config file: guardrails: [{ name: ${name}, use: ${name}, on: both, action: block }]`,
    ]),
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
  const builtIn = builtInManifest(env);
  const options = conformanceOptions(resolve(positionals[0]!), builtIn, env);
  if (typeof options === 'string') {
    io.err(options);
    return 1;
  }
  if (!(await typeCheckTested(options, builtIn, io))) return 1;
  const log = (line: string) => io.out(`  log ${line}\n`);
  const report = await runConformance(values.verbose ? { ...options, log } : options);
  printConformance(report, io);
  if (values.upstream === undefined) return report.ok ? 0 : 1;
  // The live vendor is asked whatever the suite found: it tells what the mock cannot.
  const live = await checkAgainstVendor(options, values.upstream, values.key!, io);
  return report.ok && live ? 0 : 1;
}

/**
 * What the suite tests for `plugin test DIRECTORY`: a plugins directory's listed plugins, or one plugin folder
 * its manifest lists, beside the built-in ones; or why the directory holds nothing to test.
 */
function conformanceOptions(directory: string, builtIn: string, env: NodeJS.ProcessEnv): ConformanceOptions | string {
  // The plugins the gateway would load beside it (GATEWAY_PLUGIN_PATH), so that collisions show here, not at start-up.
  const configured = (env.GATEWAY_PLUGIN_PATH ?? '')
    .split(':')
    .filter(Boolean)
    .map((path) => resolve(path));
  const withConfigured = (tested: string) => [...configured.filter((path) => path !== tested), tested];
  if (existsSync(join(directory, 'manifest.json'))) {
    const manifest = join(directory, 'manifest.json');
    return manifest === builtIn
      ? { manifestPath: builtIn, pluginPath: configured }
      : {
          manifestPath: builtIn,
          pluginPath: withConfigured(directory),
          vendors: readManifest(manifest).map((folder) => folder.name),
        };
  }
  if (!PLUGIN_ENTRY_FILES.some((file) => existsSync(join(directory, file))))
    return `${directory} holds neither a manifest.json nor a plugin (${PLUGIN_ENTRY_FILES.join(', ')}).\n`;
  const manifest = join(dirname(directory), 'manifest.json');
  const vendor = basename(directory);
  if (!existsSync(manifest) || !readManifest(manifest).some((folder) => folder.name === vendor))
    return `No manifest lists '${vendor}': add it to ${manifest} ({"plugins": [..., "${vendor}"]}).\n`;
  return manifest === builtIn
    ? { manifestPath: builtIn, pluginPath: configured, vendors: [vendor] }
    : { manifestPath: builtIn, pluginPath: withConfigured(dirname(directory)), vendors: [vendor] };
}

/**
 * Type-checks the tested plugins that are not built in, first: a misspelled field or a wrong type is a compile
 * error with a line number. False when one does not compile.
 */
async function typeCheckTested(options: ConformanceOptions, builtIn: string, io: CliIo): Promise<boolean> {
  if (!options.vendors || !options.pluginPath?.length) return true;
  const tested = pluginFolders(options.manifestPath, options.pluginPath).filter(
    (folder) => options.vendors!.includes(folder.name) && folder.manifestPath !== builtIn,
  );
  const errors = await typeCheckPlugins(
    tested.map((folder) => folder.directory),
    CONTRACT_FILE,
  );
  if (errors?.length) {
    io.out(`✘ type check: ${errors.length} error(s)\n${errors.map((error) => `    ${error}\n`).join('')}`);
    return false;
  }
  if (errors) io.out(`✔ type check: ${tested.map((folder) => folder.name).join(', ')}\n`);
  return true;
}

/** The suite's failures, then each plugin's checks: passed with their notes, or its failures. */
function printConformance(report: ConformanceReport, io: CliIo): void {
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
