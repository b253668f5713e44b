import { parseArgs } from 'node:util';
import { loadConfig } from '../config/gateway-config.ts';
import { parseDeliveriesLimit } from '../control-plane/alert-routes.ts';
import { createLogger } from '../core/logger.ts';
import { openStores } from '../stores/open-stores.ts';
import { CliUsageError, type CliIo } from './cli-io.ts';
import { textTable } from './text-table.ts';

export const ALERTS_SYNOPSIS = `alerts list [--json]
alerts deliveries [--limit N] [--json]`;

const OPTIONS = { json: { type: 'boolean' }, limit: { type: 'string' } } as const;

// The embedded store keeps alerts in the gateway's process, out of the CLI's reach.
const IN_PROCESS =
  'Limit alerts are kept in the gateway process without Redis (REDIS_URL); read them from the running gateway: ' +
  'GET /admin/alerts and /admin/alerts/deliveries, or the account page.\n';

/** How each action shows its entries: what it says when there is none, and the columns of its table. */
const VIEWS = {
  list: {
    none: 'No limit alert has fired yet.\n',
    columns: [
      'fired_at',
      'scope',
      'owner',
      'team',
      'kind',
      'period',
      'threshold',
      'used',
      'limit',
      'unit',
      'window_end',
      'id',
    ],
  },
  deliveries: {
    none: 'No webhook deliveries yet.\n',
    columns: ['at', 'delivery', 'alert', 'owner', 'attempt', 'outcome', 'status', 'error', 'next_attempt_at'],
  },
} as const;

/** The entries as JSON lines, or as a table with `-` for a field without a value. */
function printEntries(
  entries: readonly object[],
  view: (typeof VIEWS)[keyof typeof VIEWS],
  json: boolean,
  io: CliIo,
): void {
  if (json) {
    for (const entry of entries) io.out(`${JSON.stringify(entry)}\n`);
    return;
  }
  if (entries.length === 0) {
    io.out(view.none);
    return;
  }
  const shown = entries.map((entry) =>
    Object.fromEntries(Object.entries(entry).map(([field, value]) => [field, value ?? '-'])),
  );
  io.out(textTable(shown, view.columns));
}

/**
 * `alerts list`: each limit alert's last firing (as `GET /admin/alerts`); `alerts deliveries`: the newest
 * webhook delivery attempts (as `GET /admin/alerts/deliveries`); a table, or JSON lines with `--json`.
 * Read from Redis; with the embedded store they live in the gateway's process (exit 1 saying so).
 */
export async function runAlertsCommand(
  argv: string[],
  io: CliIo,
  env: NodeJS.ProcessEnv = process.env,
): Promise<number> {
  const [action, ...rest] = argv;
  if (action !== 'list' && action !== 'deliveries') {
    throw new CliUsageError(action === undefined ? 'alerts needs an action' : `unknown alerts action '${action}'`);
  }
  const { values } = parseArgs({ args: rest, options: OPTIONS, strict: true, allowPositionals: false });
  if (action === 'list' && values.limit !== undefined) throw new CliUsageError('alerts list takes no --limit');
  const limit =
    action === 'deliveries' ? parseDeliveriesLimit(values.limit === undefined ? {} : { limit: values.limit }) : 0;
  const config = loadConfig(env);
  if (!config.redis) {
    io.err(IN_PROCESS);
    return 1;
  }
  const stores = await openStores(config, { unreachableRedis: 'fail', logger: createLogger('silent') });
  try {
    const entries = action === 'list' ? await stores.alerts.lastFirings() : await stores.alerts.deliveries(limit);
    printEntries(entries, VIEWS[action], values.json === true, io);
    return 0;
  } finally {
    await stores.close();
  }
}
