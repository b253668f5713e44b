import { parseArgs } from 'node:util';
import { loadConfig } from '../config/gateway-config.ts';
import { parseGroupChanges, parseNewGroup } from '../control-plane/admin/group-input.ts';
import { deleteGroup, groupDetails, type GroupDetail } from '../control-plane/admin/group-routes.ts';
import { GROUP_FIELDS, type GroupRecord } from '../core/limits.ts';
import type { OpenStores } from '../stores/open-stores.ts';
import { CliUsageError, type CliIo } from './cli-io.ts';
import { withOperatorStores } from './operator-stores.ts';
import {
  describeQuotaAndBudget,
  LIMIT_FLAGS,
  numberOf,
  pairOf,
  quotaAndBudgetCells,
  quotaAndBudgetChanges,
  SIDE_OPTIONS,
  SIDES,
  sidesOf,
} from './limit-flags.ts';
import { nameArgument, noneNamed } from './name-argument.ts';
import { textTable } from './text-table.ts';

const LIMIT_SYNOPSIS =
  "[--tpm N] [--daily-tokens N] [--monthly-tokens N] [--daily-usd X] [--monthly-usd Y] [--alerts PERCENT,... ('' for none)]";

export const GROUPS_SYNOPSIS = `groups create NAME ${LIMIT_SYNOPSIS}
groups list
groups show NAME [--json]
groups update NAME ${LIMIT_SYNOPSIS} [--clear tpm|quota|budget|alerts|daily-tokens|monthly-tokens|daily-usd|monthly-usd]...
groups delete NAME`;

const GROUP_OPTIONS = {
  tpm: { type: 'string' },
  ...SIDE_OPTIONS,
  alerts: { type: 'string' },
} as const;

type GroupFlag = keyof typeof GROUP_OPTIONS;
type GroupValues = Partial<Record<GroupFlag, string>>;

const CLEARABLE = [...GROUP_FIELDS, ...Object.keys(SIDES)] as const;

const flagOf = (path: string) =>
  path === 'name' ? 'NAME' : path === 'body' ? 'flags' : (LIMIT_FLAGS[path] ?? `--${path}`);

/** `--alerts 50,80,100` as numbers (each as given, so validation names the flag); `''`: none. */
const percentsOf = (value: string) =>
  value
    .split(',')
    .map((part) => part.trim())
    .filter(Boolean)
    .map((part) => numberOf(part));

const groupName = (positionals: string[], action: string) => nameArgument(positionals, 'group', action);

/** The group's fields the flags give, as the admin API's body holds them. */
function fieldsOf(values: GroupValues): Record<string, unknown> {
  const quota = pairOf(['daily', numberOf(values['daily-tokens'])], ['monthly', numberOf(values['monthly-tokens'])]);
  const budget = pairOf(['daily_usd', numberOf(values['daily-usd'])], ['monthly_usd', numberOf(values['monthly-usd'])]);
  return {
    ...(values.tpm !== undefined && { tpm: numberOf(values.tpm) }),
    ...(quota && { quota }),
    ...(budget && { budget }),
    ...(values.alerts !== undefined && { alerts: percentsOf(values.alerts) }),
  };
}

/**
 * The PATCH the flags make of a group: a flag given sets its field, a field cleared is null. A side of
 * `quota` or `budget` changes that side only, keeping the other as the group has it; a limit left with
 * neither side is removed.
 */
function changesOf(values: GroupValues, cleared: ReadonlySet<string>, current: GroupRecord): Record<string, unknown> {
  const body: Record<string, unknown> = {};
  if (cleared.has('tpm')) body.tpm = null;
  else if (values.tpm !== undefined) body.tpm = numberOf(values.tpm);
  if (cleared.has('alerts')) body.alerts = null;
  else if (values.alerts !== undefined) body.alerts = percentsOf(values.alerts);
  return Object.assign(body, quotaAndBudgetChanges(values, cleared, current));
}

function describeLimits(group: GroupRecord): string {
  const parts = [
    group.tpm !== undefined && `tpm ${group.tpm}`,
    ...describeQuotaAndBudget(group),
    group.alerts !== undefined && `alerts at ${group.alerts.map((percent) => `${percent} %`).join(', ') || 'none'}`,
  ].filter(Boolean);
  return parts.length ? parts.join(', ') : 'no limits';
}

async function createGroup(argv: string[], io: CliIo, { groups }: OpenStores): Promise<number> {
  const { values, positionals } = parseArgs({
    args: argv,
    options: GROUP_OPTIONS,
    strict: true,
    allowPositionals: true,
  });
  const group = await groups.create(
    parseNewGroup({ name: groupName(positionals, 'create'), ...fieldsOf(values) }, flagOf),
  );
  io.out(
    `Created group ${group.name} (${describeLimits(group)}); name it on teams or keys with --group ${group.name}.\n`,
  );
  return 0;
}

async function listGroups(argv: string[], io: CliIo, stores: OpenStores): Promise<number> {
  parseArgs({ args: argv, options: {}, strict: true, allowPositionals: false });
  const details = await groupDetails(stores, await stores.groups.list(), Date.now());
  if (details.length === 0) {
    io.out('No groups yet (groups create NAME makes one).\n');
    return 0;
  }
  const rows = details.map((group) => ({
    name: group.name,
    created: group.created_at,
    tpm: group.tpm ?? '-',
    ...quotaAndBudgetCells(group),
    alerts: group.alerts ? group.alerts.join(',') || 'none' : '-',
    teams: group.members.teams.join(',') || '-',
    keys: group.members.keys.map((key) => key.id).join(',') || '-',
  }));
  const columns = ['name', 'created', 'tpm', 'daily-tokens', 'monthly-tokens', 'daily-usd', 'monthly-usd', 'alerts'];
  io.out(textTable(rows, [...columns, 'teams', 'keys']));
  return 0;
}

const PERIOD = { minute: 'per minute', day: 'today (UTC)', month: 'this month (UTC)' } as const;
const KIND = { rpm: 'requests', tpm: 'tokens', quota: 'charged tokens', budget: 'USD' } as const;

/**
 * One group with its members and each limit's use now: the shared counters on Redis; on the embedded store,
 * the day and month counters the server last wrote, and tokens per minute as not counted here.
 */
async function showGroup(argv: string[], io: CliIo, stores: OpenStores): Promise<number> {
  const { values, positionals } = parseArgs({
    args: argv,
    options: { json: { type: 'boolean' } },
    strict: true,
    allowPositionals: true,
  });
  const name = groupName(positionals, 'show');
  const group = await stores.groups.get(name);
  if (!group) return noneNamed(io, 'group', name);
  const [found] = await groupDetails({ ...stores, limits: stores.ledger }, [group], Date.now());
  // Minute counters live in the embedded server's memory only: not known here.
  const use = found!.use.map((entry) =>
    stores.redis || entry.period !== 'minute' ? entry : { ...entry, used: null, remaining: null },
  );
  const detail: GroupDetail = { ...found!, use };
  if (values.json) {
    io.out(`${JSON.stringify(detail, null, 2)}\n`);
    return 0;
  }
  const keys = detail.members.keys.map((key) => `${key.id} (${key.name}${key.team ? `, team ${key.team}` : ''})`);
  const lines = [
    `Group ${detail.name} (${describeLimits(group)})`,
    `Teams: ${detail.members.teams.join(', ') || 'none'}`,
    `Keys naming it: ${keys.join(', ') || 'none'}`,
  ];
  const rows = detail.use.map((entry) => ({
    limit: `${KIND[entry.kind]} ${PERIOD[entry.period]}`,
    used: entry.used ?? 'not counted here',
    of: entry.limit,
    left: entry.remaining ?? '',
    percent: entry.used === null ? '' : `${Math.floor((entry.used / entry.limit) * 100)} %`,
    resets: entry.resets_at,
  }));
  const table = rows.length ? textTable(rows, ['limit', 'used', 'of', 'left', 'percent', 'resets']) : 'No limits.\n';
  io.out(`${lines.join('\n')}\n${table}`);
  return 0;
}

async function updateGroup(argv: string[], io: CliIo, { groups }: OpenStores): Promise<number> {
  const options = { ...GROUP_OPTIONS, clear: { type: 'string', multiple: true } } as const;
  const { values, positionals } = parseArgs({ args: argv, options, strict: true, allowPositionals: true });
  const name = groupName(positionals, 'update');
  const cleared = new Set(values.clear ?? []);
  for (const field of cleared) {
    if (!(CLEARABLE as readonly string[]).includes(field)) {
      throw new CliUsageError(`--clear takes one of ${CLEARABLE.join(', ')}; got '${field}'`);
    }
    const setToo = (field === 'quota' || field === 'budget' ? sidesOf(field) : [field as GroupFlag]).find(
      (flag) => values[flag] !== undefined,
    );
    if (setToo) throw new CliUsageError(`--clear ${field} and --${setToo} contradict each other`);
  }
  const current = await groups.get(name);
  const updated =
    current && (await groups.update(name, parseGroupChanges(changesOf(values, cleared, current), flagOf)));
  if (!updated) return noneNamed(io, 'group', name);
  io.out(`Updated group ${name} (${describeLimits(updated)}); every gateway instance applies it within seconds.\n`);
  return 0;
}

/** Deletes a group as the admin API does: refused while teams or keys that are not revoked name it. */
async function removeGroup(argv: string[], io: CliIo, stores: OpenStores): Promise<number> {
  const { positionals } = parseArgs({ args: argv, options: {}, strict: true, allowPositionals: true });
  const name = groupName(positionals, 'delete');
  if (!(await deleteGroup(name, stores))) return noneNamed(io, 'group', name);
  io.out(`Deleted group ${name}.\n`);
  return 0;
}

const ACTIONS: Record<string, (argv: string[], io: CliIo, stores: OpenStores) => Promise<number>> = {
  create: createGroup,
  list: listGroups,
  show: showGroup,
  update: updateGroup,
  delete: removeGroup,
};

/** `groups create|list|show|update|delete` on the stores the server of `env` uses (Redis, else the data directory). */
export async function runGroupsCommand(
  argv: string[],
  io: CliIo,
  env: NodeJS.ProcessEnv = process.env,
): Promise<number> {
  const [action, ...rest] = argv;
  const run = action === undefined ? undefined : ACTIONS[action];
  if (!run)
    throw new CliUsageError(action === undefined ? 'groups needs an action' : `unknown groups action '${action}'`);
  const limits = action === 'show' ? ({ limits: 'read' } as const) : {};
  return withOperatorStores(loadConfig(env), { unreachableRedis: 'fail', ...limits }, (stores) =>
    run(rest, io, stores),
  );
}
