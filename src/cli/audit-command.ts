import { parseArgs } from 'node:util';
import { loadConfig } from '../config/gateway-config.ts';
import { createLogger } from '../core/logger.ts';
import { auditMatches, parseAuditQuery, type AuditQuery } from '../control-plane/access/audit-route.ts';
import { verifyChain, type AuditRecord, type AuditStore } from '../stores/audit/audit-store.ts';
import { openStores } from '../stores/open-stores.ts';
import { CliUsageError, type CliIo } from './cli-io.ts';
import { textTable } from './text-table.ts';

export const AUDIT_SYNOPSIS = `audit list [--action ACTION|FAMILY.] [--actor ID|NAME] [--team NAME] [--target ID] [--outcome ok|refused] [--via admin|account|cli|config] [--from ISO] [--to ISO] [--limit N] [--before SEQ] [--json]
audit verify`;

const FILTERS = {
  action: { type: 'string' },
  actor: { type: 'string' },
  team: { type: 'string' },
  target: { type: 'string' },
  outcome: { type: 'string' },
  via: { type: 'string' },
  from: { type: 'string' },
  to: { type: 'string' },
  limit: { type: 'string' },
  before: { type: 'string' },
  json: { type: 'boolean' },
} as const;

/** `audit verify`: 0 when the whole hash chain holds, else 1 naming the first record changed, removed or cut. */
async function verifyAudit(audit: AuditStore, io: CliIo): Promise<number> {
  const check = verifyChain(await audit.all(), await audit.head());
  if (!check.ok) {
    io.err(`Audit log broken: ${check.problem!.reason}. Records before ${check.problem!.seq} are intact.\n`);
    return 1;
  }
  io.out(
    `Audit log intact: ${check.records} record${check.records === 1 ? '' : 's'}, every hash in the chain checked.\n`,
  );
  return 0;
}

/** The columns of the `audit list` table, each a field of {@link auditRow}. */
const AUDIT_COLUMNS = ['seq', 'time', 'actor', 'roles', 'via', 'address', 'action', 'outcome', 'target', 'team'];

/** An audit record as a row of the `audit list` table: `-` where it has nothing. */
const auditRow = (record: AuditRecord) => ({
  seq: record.seq,
  time: record.time,
  actor: record.actor ? `${record.actor.kind}:${record.actor.name ?? record.actor.id}` : '-',
  roles: record.actor?.roles.join(' ') || '-',
  via: record.via,
  address: record.address ?? '-',
  action: record.action,
  outcome: record.outcome,
  target: `${record.target.type}:${record.target.id ?? '-'}`,
  team: record.target.team ?? '-',
});

/** `audit list`: the records the query matches, newest first, as JSON lines or a table. */
async function listAudit(audit: AuditStore, query: AuditQuery, json: boolean, io: CliIo): Promise<number> {
  const records = await audit.page((record) => auditMatches(record, query), query.limit, query.before);
  if (json) {
    for (const record of records) io.out(`${JSON.stringify(record)}\n`);
    return 0;
  }
  if (records.length === 0) {
    io.out('No audit records match.\n');
    return 0;
  }
  io.out(textTable(records.map(auditRow), AUDIT_COLUMNS));
  return 0;
}

/**
 * `audit list`: the audit log's records, newest first, with the filters of `GET /admin/audit` (a table,
 * or JSON lines with `--json`). `audit verify`: walks the whole hash chain; exit 0 when intact, 1 naming
 * the first record that was changed, removed or cut.
 */
export async function runAuditCommand(
  argv: string[],
  io: CliIo,
  env: NodeJS.ProcessEnv = process.env,
): Promise<number> {
  const [action, ...rest] = argv;
  if (action !== 'list' && action !== 'verify')
    throw new CliUsageError(action === undefined ? 'audit needs an action' : `unknown audit action '${action}'`);
  const { values } = parseArgs({
    args: rest,
    options: action === 'list' ? FILTERS : {},
    strict: true,
    allowPositionals: false,
  });
  const { json, ...filters } = values as Record<string, string | boolean | undefined>;
  const query =
    action === 'list'
      ? parseAuditQuery(Object.fromEntries(Object.entries(filters).filter(([, value]) => value !== undefined)))
      : undefined;
  const stores = await openStores(loadConfig(env), { unreachableRedis: 'fail', logger: createLogger('silent') });
  try {
    return query ? await listAudit(stores.audit, query, Boolean(json), io) : await verifyAudit(stores.audit, io);
  } finally {
    await stores.close();
  }
}
