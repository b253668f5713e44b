import { parseArgs } from 'node:util';
import { loadConfig } from '../config/gateway-config.ts';
import { createLogger } from '../core/logger.ts';
import { limitUseView, type LimitUse } from '../control-plane/limit-use.ts';
import { openStores } from '../stores/open-stores.ts';
import { CliUsageError, type CliIo } from './cli-io.ts';
import { textTable } from './text-table.ts';

export const LIMITS_SYNOPSIS = 'limits [--json]';

const PERIOD = { minute: 'per minute', day: 'today (UTC)', month: 'this month (UTC)' } as const;
const KIND = {
  rpm: 'requests',
  tpm: 'tokens',
  quota: 'charged tokens',
  budget: 'USD',
  concurrency: 'requests at once',
} as const;

/**
 * One row per limit of an owner with its use: its requests per minute (a key's own or the default), then each token and
 * money limit.
 */
function rows(owner: string, use: readonly LimitUse[]): Record<string, unknown>[] {
  const lines: Record<string, unknown>[] = [];
  for (const entry of use) {
    if (entry.used === null) {
      lines.push({
        owner,
        limit: `${KIND[entry.kind]} ${PERIOD[entry.period]}`,
        used: 'not counted here',
        of: entry.limit,
      });
      continue;
    }
    lines.push({
      owner,
      limit: `${KIND[entry.kind]} ${PERIOD[entry.period]}`,
      used: entry.used ?? 'not counted here',
      of: entry.limit,
      left: entry.remaining,
      percent: entry.used === null ? '' : `${Math.floor((entry.used / entry.limit) * 100)} %`,
      resets: entry.resets_at,
    });
  }
  return lines;
}

/**
 * `limits`: every key's and team's limits and their use now, read from the store the server uses. On
 * Redis the counters are the shared ones; on the embedded store they are the day and month counters
 * the server last wrote to the data directory (about half a second behind), and requests and tokens
 * per minute, kept in the server's memory only, show as not counted here.
 */
export async function runLimitsCommand(
  argv: string[],
  io: CliIo,
  env: NodeJS.ProcessEnv = process.env,
): Promise<number> {
  const { values, positionals } = parseArgs({
    args: argv,
    options: { json: { type: 'boolean' } },
    allowPositionals: true,
    strict: true,
  });
  if (positionals.length > 0) throw new CliUsageError(`limits takes no arguments (got '${positionals[0]}')`);
  const config = loadConfig(env);
  const logger = createLogger('silent');
  const stores = await openStores(config, { unreachableRedis: 'fail', logger, limits: 'read' });
  const { redis, ledger } = stores;
  try {
    const [keys, teams] = await Promise.all([stores.keys.list(), stores.teams.list()]);
    const counted = await limitUseView({ keys, teams, ledger, rate: config.rateLimit, now: Date.now() });
    // Minute counters live in the embedded server's memory only: not known here.
    const unknownMinutes = (use: readonly LimitUse[]) =>
      use.map((entry) => (redis || entry.period !== 'minute' ? entry : { ...entry, used: null, remaining: null }));
    const view = {
      ...counted,
      keys: counted.keys.map((key) => ({ ...key, use: unknownMinutes(key.use) })),
      teams: counted.teams.map((team) => ({ ...team, use: unknownMinutes(team.use) })),
    };
    if (values.json) {
      io.out(`${JSON.stringify(view, null, 2)}\n`);
      return 0;
    }
    const lines = [
      ...view.keys.flatMap((key) =>
        rows(`key ${key.name} (${key.id})${key.team ? `, team ${key.team}` : ''}`, key.use),
      ),
      ...view.teams.flatMap((team) => rows(`team ${team.name}`, team.use)),
    ];
    io.out(
      lines.length
        ? textTable(lines, ['owner', 'limit', 'used', 'of', 'left', 'percent', 'resets'])
        : 'No keys, and no team has a limit.\n',
    );
    return 0;
  } finally {
    await stores.close();
  }
}
