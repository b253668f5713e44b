import { resolve } from 'node:path';
import { ConfigError, loadConfig } from '../config/gateway-config.ts';
import { aliasProblems, configFilePath, configVersion } from '../config/live-config.ts';
import { loadPlugins } from '../plugins/load-plugins.ts';
import { PluginLoadError } from '../plugins/validate-plugin.ts';
import { CliUsageError, type CliIo } from './cli-io.ts';

export const CONFIG_SYNOPSIS = 'config check [FILE]   (default: GATEWAY_CONFIG, else config/gateway.yaml; exit 0 valid, 1 invalid)';

/**
 * `config check [FILE]`: validates a config file as a start or a reload would (schema, environment
 * overrides, every alias target), without starting the server. One summary line when valid; every
 * problem, each with its field path, when not.
 */
/** yup names unknown keys without their path (`this field has unspecified keys: a, b`): give each its path. */
function withFieldPath(problem: string): string {
  const match = /^(this|\S+) field has unspecified keys: (.+)$/.exec(problem);
  if (!match) return problem;
  const parent = match[1] === 'this' ? '' : `${match[1]}.`;
  return match[2]!.split(', ').map((key) => `${parent}${key} is not a known setting`).join('\n  ');
}

export async function runConfigCommand(argv: string[], io: CliIo, env: NodeJS.ProcessEnv): Promise<number> {
  const [action, ...rest] = argv;
  if (action !== 'check') throw new CliUsageError(action ? `Unknown config command '${action}'.` : 'Missing config command.');
  if (rest.length > 1) throw new CliUsageError('config check takes at most one file.');
  const path = rest[0] ? resolve(rest[0]) : configFilePath(env);
  let problems: string[];
  let summary = '';
  try {
    const config = loadConfig({ ...env, GATEWAY_CONFIG: path });
    const plugins = await loadPlugins(config.manifestPath, config.pluginPath);
    problems = aliasProblems(plugins, config.aliases);
    const aliases = Object.keys(config.aliases).length;
    const providers = Object.keys(config.providers).length;
    summary =
      `${path}: valid (version ${configVersion(path)}; ${plugins.length} plugins, ${aliases} alias override${aliases === 1 ? '' : 's'}, ` +
      `${providers} provider${providers === 1 ? '' : 's'} in the file, rate limit ${config.rateLimit.max} per ${config.rateLimit.windowMs} ms, log level ${config.logLevel})`;
  } catch (error) {
    if (!(error instanceof ConfigError) && !(error instanceof PluginLoadError)) throw error;
    // A schema failure lists every bad field, one per line after its heading.
    problems = error.message.split('\n').map((line) => line.trim()).filter((line, index) => line && !(index === 0 && line.endsWith('is invalid:')))
      .map(withFieldPath);
  }
  if (problems.length) {
    io.err(`${path}: invalid\n${problems.map((problem) => `  ${problem}`).join('\n')}\n`);
    return 1;
  }
  io.out(`${summary}\n`);
  return 0;
}
