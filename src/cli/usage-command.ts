import { loadConfig } from '../config/gateway-config.ts';
import { openStores } from '../server/gateway.ts';
import { createLogger } from '../core/logger.ts';
import { printUsageReport, USAGE_COMMAND_SYNOPSIS } from './usage-report.ts';
import type { CliIo } from './cli-io.ts';

export const USAGE_SYNOPSIS = USAGE_COMMAND_SYNOPSIS;

/** `usage`: opens the store the server writes (Redis or the data directory) and prints its table. */
export async function runUsageCommand(argv: string[], io: CliIo, env: NodeJS.ProcessEnv = process.env): Promise<number> {
  const { redis, keys, teams, usage } = await openStores(loadConfig(env), createLogger('silent'));
  try {
    return await printUsageReport(argv, io, usage);
  } finally {
    await usage.close();
    await keys.close();
    await teams.close();
    redis?.disconnect();
  }
}
