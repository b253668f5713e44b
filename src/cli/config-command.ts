import { resolve } from 'node:path';
import { inspectConfig } from '../config/gateway-config.ts';
import { configFilePath, configVersion, modelTableProblems } from '../server/live-config.ts';
import { loadAllPlugins } from '../plugins/load-plugins.ts';
import { PluginLoadError } from '../plugins/validate-plugin.ts';
import { CliUsageError, type CliIo } from './cli-io.ts';

export const CONFIG_SYNOPSIS =
  'config check [FILE]   (default: GATEWAY_CONFIG, else config/gateway.yaml; exit 0 valid, 1 invalid)';

/**
 * `config check [FILE]`: validates a config file as a start or a reload would (schema, environment
 * overrides, every plugin, every alias target and the routes it serves, fallbacks), without starting
 * the server. One summary line when valid; when not, every problem found in one run, each by line,
 * column and field path, or by plugin, file and field (never quoting the file, which may hold upstream keys).
 */
export async function runConfigCommand(argv: string[], io: CliIo, env: NodeJS.ProcessEnv): Promise<number> {
  const [action, ...rest] = argv;
  if (action !== 'check')
    throw new CliUsageError(action ? `Unknown config command '${action}'.` : 'Missing config command.');
  if (rest.length > 1) throw new CliUsageError('config check takes at most one file.');
  const path = rest[0] ? resolve(rest[0]) : configFilePath(env);
  const inspection = inspectConfig({ ...env, GATEWAY_CONFIG: path });
  const { config } = inspection;
  const problems = [...inspection.problems];
  let plugins;
  try {
    const loaded = await loadAllPlugins(config.manifestPath, config.pluginPath);
    plugins = loaded.providers;
    problems.push(...inspection.describe(modelTableProblems(plugins, config, loaded.guardrails)));
  } catch (error) {
    if (!(error instanceof PluginLoadError)) throw error;
    // Every problem of every plugin; the model table (aliases, fallbacks) is checked once they all load.
    problems.push(...error.problems);
  }
  if (problems.length || !plugins) {
    io.err(`${path}: invalid\n${problems.map((problem) => `  ${problem}`).join('\n')}\n`);
    return 1;
  }
  const aliases = Object.keys(config.aliases).length;
  const providers = Object.keys(config.providers).length;
  io.out(
    `${path}: valid (version ${configVersion(path)}; ${plugins.length} plugins, ${aliases} alias override${aliases === 1 ? '' : 's'}, ` +
      `${providers} provider${providers === 1 ? '' : 's'} in the file, rate limit ${config.rateLimit.max} per ${config.rateLimit.windowMs} ms, log level ${config.logLevel})\n`,
  );
  return 0;
}
