import { parseArgs } from 'node:util';
import { loadConfig } from '../config/gateway-config.ts';
import { openStores } from '../gateway.ts';
import { createLogger } from '../logger.ts';
import { CliUsageError, type CliIo } from './cli-io.ts';
import { textTable } from './text-table.ts';

export const USAGE_SYNOPSIS = 'usage [--key KEY_ID] [--from YYYY-MM-DD] [--to YYYY-MM-DD] [--group-by model|day]';

/** `usage`: summed token usage from the store the server writes, as a table. */
export async function runUsageCommand(argv: string[], io: CliIo, env: NodeJS.ProcessEnv = process.env): Promise<number> {
  const { values } = parseArgs({
    args: argv,
    options: { key: { type: 'string' }, from: { type: 'string' }, to: { type: 'string' }, 'group-by': { type: 'string', default: 'model' } },
    strict: true,
    allowPositionals: false,
  });
  const groupBy = values['group-by'];
  if (groupBy !== 'model' && groupBy !== 'day') throw new CliUsageError("--group-by must be 'model' or 'day'");
  const { redis, keys, usage } = await openStores(loadConfig(env), createLogger('silent'));
  try {
    const rows = await usage.query({ keyId: values.key, fromDay: values.from?.slice(0, 10), toDay: values.to?.slice(0, 10), groupBy });
    const columns = [groupBy, 'requests', 'input_tokens', 'output_tokens', 'cached_tokens', 'total_tokens', 'charged_tokens', 'cost_usd'];
    io.out(textTable(rows as unknown as Record<string, unknown>[], columns));
    return 0;
  } finally {
    await usage.close();
    await keys.close();
    redis?.disconnect();
  }
}
