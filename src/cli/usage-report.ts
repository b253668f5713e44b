import { parseArgs } from 'node:util';
import { textTable } from './text-table.ts';
import { isGatewayError } from '../core/gateway-errors.ts';
import { parseUsageQuery, readUsage, type UsageRequest } from '../control-plane/usage-routes.ts';
import {
  groupFields,
  USAGE_COUNT_FIELDS,
  type UsageRow,
  type UsageStore,
  formatCost,
} from '../usage/usage-accounting.ts';
import type { KeyStore } from '../stores/keys/key-store.ts';
import type { TeamStore } from '../stores/teams/team-store.ts';

export const USAGE_COMMAND_SYNOPSIS =
  'usage [--key KEY_ID] [--from DATE] [--to DATE] [--group-by model|day|key|team|end-user]';

/** What a row without a group name shows: keys in no team, requests naming no end user (counted as their key). */
const UNNAMED: Record<string, string> = { team: '(no team)', end_user: '(none: the key)' };

/** Usage rows as an aligned plain-text table: a header line, then one line per row. */
export function usageTable(rows: readonly UsageRow[], groupBy: UsageRequest['groupBy']): string {
  const first = groupFields(groupBy);
  const cells = rows.map((row) => ({
    ...row,
    ...Object.fromEntries(first.map((name) => [name, row[name] ?? UNNAMED[name] ?? ''])),
    cost_usd: formatCost(row.cost_usd),
    saved_usd: formatCost(row.saved_usd),
  }));
  return textTable(cells, [...first, ...USAGE_COUNT_FIELDS]);
}

/**
 * `usage [--key KEY_ID] [--from DATE] [--to DATE] [--group-by model|day|key|team|end-user]`: summed usage from
 * the store, as a table; every key's unless `--key` is given. `--from`/`--to` are ISO dates or
 * date-times (UTC days, inclusive); `team` sums each key's usage under the team its record names now
 * (read from `keys`; with `teams`, a key of an earlier team whose name a later team took counts under
 * none). Returns the exit code: 0, or 2 for bad arguments (the reason on `io.err`).
 */
export async function printUsageReport(
  argv: string[],
  io: { out(text: string): void; err(text: string): void },
  store: UsageStore,
  keys?: Pick<KeyStore, 'list'>,
  teams?: Pick<TeamStore, 'list'>,
): Promise<number> {
  let values;
  try {
    values = parseArgs({
      args: argv,
      options: {
        key: { type: 'string' },
        from: { type: 'string' },
        to: { type: 'string' },
        'group-by': { type: 'string' },
      },
      strict: true,
      allowPositionals: false,
    }).values;
  } catch (error) {
    io.err(`${(error as Error).message}\nusage: ${USAGE_COMMAND_SYNOPSIS}\n`);
    return 2;
  }
  let query;
  try {
    const raw = Object.fromEntries(
      Object.entries({
        key_id: values.key,
        from: values.from,
        to: values.to,
        group_by: values['group-by'] === 'end-user' ? 'end_user' : values['group-by'],
      }).filter(([, value]) => value !== undefined),
    );
    query = parseUsageQuery(raw, true);
  } catch (error) {
    if (!isGatewayError(error)) throw error;
    const options: Record<string, string> = { key_id: '--key', from: '--from', to: '--to', group_by: '--group-by' };
    const problems = (error.errors ?? [error.detail]).map((problem) =>
      problem
        .replace(/^Field 'query\.(\w+)'/, (_, name: string) => options[name] ?? name)
        .replace("'end_user'", "'end-user'"),
    );
    io.err(`${problems.join('\n')}\nusage: ${USAGE_COMMAND_SYNOPSIS}\n`);
    return 2;
  }
  io.out(usageTable(await readUsage(store, keys, query, teams), query.groupBy));
  return 0;
}
