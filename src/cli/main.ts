import { ConfigError } from '../config/gateway-config.ts';
import { resolveEnvFiles } from '../config/env-files.ts';
import { isGatewayError } from '../core/gateway-errors.ts';
import { CliUsageError, type CliIo } from './cli-io.ts';
import { runUsageCommand, USAGE_SYNOPSIS } from './usage-command.ts';
import { KEYS_SYNOPSIS, runKeysCommand } from './keys-command.ts';
import { runTeamsCommand, TEAMS_SYNOPSIS } from './teams-command.ts';
import { GROUPS_SYNOPSIS, runGroupsCommand } from './groups-command.ts';
import { LIMITS_SYNOPSIS, runLimitsCommand } from './limits-command.ts';
import { PLUGIN_SYNOPSIS, runPluginCommand } from './plugin-command.ts';
import { CONFIG_SYNOPSIS, runConfigCommand } from './config-command.ts';
import { CACHE_SYNOPSIS, runCacheCommand } from './cache-command.ts';
import { AUDIT_SYNOPSIS, runAuditCommand } from './audit-command.ts';
import { ALERTS_SYNOPSIS, runAlertsCommand } from './alerts-command.ts';
import { runTokensCommand, TOKENS_SYNOPSIS } from './tokens-command.ts';

export type { CliIo } from './cli-io.ts';

/** One top-level command: `run` gets the arguments after the command's name and returns the exit code. */
export interface CliCommand {
  /** Its usage lines, for help and for bad-usage messages. */
  readonly synopsis: string;
  run(argv: string[], io: CliIo, env: NodeJS.ProcessEnv): Promise<number>;
}

const HEADER =
  "model-gateway: operator commands (keys, teams, budget groups, service tokens, the audit log, limits, limit alerts and usage on the store the server uses: REDIS_URL, else GATEWAY_DATA_DIR, default data/; the response cache on Redis) and plugin authors' tools";

const commands: Record<string, CliCommand> = {
  keys: { synopsis: KEYS_SYNOPSIS, run: runKeysCommand },
  teams: { synopsis: TEAMS_SYNOPSIS, run: runTeamsCommand },
  groups: { synopsis: GROUPS_SYNOPSIS, run: runGroupsCommand },
  limits: { synopsis: LIMITS_SYNOPSIS, run: runLimitsCommand },
  usage: { synopsis: USAGE_SYNOPSIS, run: runUsageCommand },
  cache: { synopsis: CACHE_SYNOPSIS, run: runCacheCommand },
  tokens: { synopsis: TOKENS_SYNOPSIS, run: runTokensCommand },
  audit: { synopsis: AUDIT_SYNOPSIS, run: runAuditCommand },
  alerts: { synopsis: ALERTS_SYNOPSIS, run: runAlertsCommand },
  plugin: { synopsis: PLUGIN_SYNOPSIS, run: runPluginCommand },
  config: { synopsis: CONFIG_SYNOPSIS, run: runConfigCommand },
  help: { synopsis: 'help', run: async (_argv, io) => (io.out(helpText()), 0) },
};

function helpText(): string {
  const lines = Object.values(commands).flatMap((command) => command.synopsis.split('\n'));
  return `${HEADER}\n\n${lines.map((line) => `  ${line}`).join('\n')}\n`;
}

const processIo: CliIo = {
  out: (text) => void process.stdout.write(text),
  err: (text) => void process.stderr.write(text),
};

/**
 * Runs one CLI invocation (`argv` without `node` and the script) and returns its exit code: 0 done,
 * 1 failed (invalid input, unknown key id or team, store unreachable), 2 bad usage.
 */
export async function runCli(
  argv: string[],
  io: CliIo = processIo,
  env: NodeJS.ProcessEnv = process.env,
): Promise<number> {
  const [name = 'help', ...rest] = argv;
  const command =
    name === '--help' || name === '-h' ? commands.help : Object.hasOwn(commands, name) ? commands[name] : undefined;
  if (!command) {
    io.err(`Unknown command '${name}'.\n\n${helpText()}`);
    return 2;
  }
  if (rest.includes('--help') || rest.includes('-h')) {
    // `plugin new --help`: the subcommand's own lines when it has some, else every line of the command.
    const lines = command.synopsis.split('\n');
    const own = lines.filter((line) => rest[0] && !rest[0].startsWith('-') && line.startsWith(`${name} ${rest[0]} `));
    io.out(`Usage:\n  ${(own.length ? own : lines).join('\n  ')}\n`);
    return 0;
  }
  try {
    return await command.run(rest, io, resolveEnvFiles(env));
  } catch (error) {
    if (error instanceof CliUsageError || (error as { code?: string }).code?.startsWith('ERR_PARSE_ARGS')) {
      io.err(`${(error as Error).message}\n\nUsage:\n  ${command.synopsis.split('\n').join('\n  ')}\n`);
      return 2;
    }
    if (isGatewayError(error)) io.err(`${[error.detail, ...(error.errors ?? [])].join('\n  ')}\n`);
    else if (error instanceof ConfigError) io.err(`Invalid configuration: ${error.message}\n`);
    else io.err(`${(error as Error).message ?? String(error)}\n`);
    return 1;
  }
}
