import { loadConfig } from '../config/gateway-config.ts';
import { openStores } from '../stores/open-stores.ts';
import { createLogger } from '../core/logger.ts';
import { printUsageReport, USAGE_COMMAND_SYNOPSIS } from './usage-report.ts';
import type { CliIo } from './cli-io.ts';

export const USAGE_SYNOPSIS = USAGE_COMMAND_SYNOPSIS;

/** `usage`: opens the store the server writes (Redis or the data directory) and prints its table. */
export async function runUsageCommand(
  argv: string[],
  io: CliIo,
  env: NodeJS.ProcessEnv = process.env,
): Promise<number> {
  // As the server does: a Redis that is away at first leaves the records it cannot read to fail with a clear error.
  const stores = await openStores(loadConfig(env), {
    unreachableRedis: 'degrade',
    usage: true,
    logger: createLogger('silent'),
  });
  try {
    return await printUsageReport(argv, io, stores.usage, stores.keys, stores.teams);
  } finally {
    await stores.close();
  }
}
