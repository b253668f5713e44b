import { parseArgs } from 'node:util';
import { parseNewTeam, parseTeamChanges } from '../control-plane/admin/team-input.ts';
import { deleteTeam } from '../control-plane/admin/team-routes.ts';
import { loadConfig } from '../config/gateway-config.ts';
import { TEAM_FIELDS, type TeamRecord } from '../core/limits.ts';
import type { OpenStores } from '../stores/open-stores.ts';
import { withOperatorStores } from './operator-stores.ts';
import { CliUsageError, type CliIo } from './cli-io.ts';
import {
  booleanOf,
  describeQuotaAndBudget,
  LIMIT_FLAGS,
  namesOf,
  numberOf,
  percentsOf,
  quotaAndBudgetCells,
  quotaAndBudgetChanges,
  SIDE_OPTIONS,
} from './limit-flags.ts';
import { nameArgument, noneNamed } from './name-argument.ts';
import { entries, operatorCache } from './cache-command.ts';
import { textTable } from './text-table.ts';
import { knownGroup } from '../control-plane/admin/key-routes.ts';
import {
  describeEndUser,
  END_USER_CLEARABLE,
  END_USER_OPTIONS,
  END_USER_SYNOPSIS,
  endUserChangeOf,
  endUserContradiction,
  endUserOfFlags,
} from './end-user-flags.ts';

const LIMIT_SYNOPSIS =
  "[--rpm N] [--tpm N] [--daily-tokens N] [--monthly-tokens N] [--daily-usd X] [--monthly-usd Y] [--concurrency N] [--cache true|false] [--guardrails NAME,... ('' for none)] [--group NAME] [--alerts PERCENT,... ('' for none)] " +
  END_USER_SYNOPSIS;

export const TEAMS_SYNOPSIS = `teams create NAME ${LIMIT_SYNOPSIS}
teams list
teams update NAME ${LIMIT_SYNOPSIS} [--clear rpm|tpm|quota|budget|concurrency|cache|guardrails|group|alerts|daily-tokens|monthly-tokens|daily-usd|monthly-usd|end-user|end-user-rpm|...]...
teams delete NAME`;

const LIMIT_OPTIONS = {
  rpm: { type: 'string' },
  tpm: { type: 'string' },
  ...SIDE_OPTIONS,
  concurrency: { type: 'string' },
} as const;

type LimitFlag = keyof typeof LIMIT_OPTIONS;

/**
 * The limits' flags, `--cache` (the team's response cache setting), `--guardrails`, `--group` (its group), `--alerts`
 * and the `--end-user-*` limits.
 */
const TEAM_OPTIONS = {
  ...LIMIT_OPTIONS,
  cache: { type: 'string' },
  guardrails: { type: 'string' },
  group: { type: 'string' },
  ...END_USER_OPTIONS,
  alerts: { type: 'string' },
} as const;

/** Each flag's place in a team: a top-level limit, or one side of `quota` / `budget`. */
const PLACE_OF: Record<LimitFlag, readonly [field: 'rpm' | 'tpm' | 'quota' | 'budget' | 'concurrency', side?: string]> =
  {
    rpm: ['rpm'],
    tpm: ['tpm'],
    concurrency: ['concurrency'],
    'daily-tokens': ['quota', 'daily'],
    'monthly-tokens': ['quota', 'monthly'],
    'daily-usd': ['budget', 'daily_usd'],
    'monthly-usd': ['budget', 'monthly_usd'],
  };

const flagOf = (path: string) => (path === 'name' ? 'NAME' : (LIMIT_FLAGS[path] ?? `--${path}`));

const teamName = (positionals: string[], action: string) => nameArgument(positionals, 'team', action);

/** The limits the flags give, as the admin API's body holds them (numbers as given, so validation names the flag). */
function limitsOf(values: Partial<Record<LimitFlag, string>>): Record<string, unknown> {
  const body: Record<string, unknown> = {};
  for (const [flag, [field, side]] of Object.entries(PLACE_OF) as [LimitFlag, (typeof PLACE_OF)[LimitFlag]][]) {
    const value = numberOf(values[flag]);
    if (value === undefined) continue;
    body[field] = side ? { ...(body[field] as object), [side]: value } : value;
  }
  return body;
}

/**
 * The PATCH the flags make of a team: a limit (or `--cache`) given is set, one cleared is null. A side of
 * `quota` or `budget` (`--daily-usd`, `--clear monthly-tokens`) changes that side only, keeping the other
 * as the team has it; a limit left with neither side is removed.
 */
function changesOf(
  values: Partial<Record<keyof typeof TEAM_OPTIONS, string>>,
  cleared: ReadonlySet<string>,
  current: TeamRecord,
): Record<string, unknown> {
  const given = limitsOf(values);
  const body: Record<string, unknown> = {};
  if (cleared.has('cache')) body.cache = null;
  else if (values.cache !== undefined) body.cache = booleanOf(values.cache);
  if (cleared.has('guardrails')) body.guardrails = null;
  else if (values.guardrails !== undefined) body.guardrails = namesOf(values.guardrails);
  if (cleared.has('group')) body.group = null;
  else if (values.group !== undefined) body.group = values.group;
  if (cleared.has('alerts')) body.alerts = null;
  else if (values.alerts !== undefined) body.alerts = percentsOf(values.alerts);
  for (const field of ['rpm', 'tpm', 'concurrency'] as const) {
    if (cleared.has(field)) body[field] = null;
    else if (field in given) body[field] = given[field];
  }
  Object.assign(body, quotaAndBudgetChanges(values, cleared, current));
  const endUser = endUserChangeOf(values, cleared, current.end_user);
  if (endUser !== undefined) body.end_user = endUser;
  return body;
}

async function createTeam(
  argv: string[],
  io: CliIo,
  stores: OpenStores,
  guardrails?: readonly string[],
): Promise<number> {
  const { teams, groups } = stores;
  const { values, positionals } = parseArgs({
    args: argv,
    options: TEAM_OPTIONS,
    strict: true,
    allowPositionals: true,
  });
  const cache = values.cache === undefined ? {} : { cache: booleanOf(values.cache) };
  const named = values.guardrails === undefined ? {} : { guardrails: namesOf(values.guardrails) };
  const group = values.group === undefined ? {} : { group: values.group };
  const alerts = values.alerts === undefined ? {} : { alerts: percentsOf(values.alerts) };
  const endUser = endUserOfFlags(values);
  const body = {
    name: teamName(positionals, 'create'),
    ...limitsOf(values),
    ...cache,
    ...named,
    ...group,
    ...alerts,
    ...(endUser && { end_user: endUser }),
  };
  const team = await teams.create(parseNewTeam(body, flagOf, guardrails, await knownGroup(groups, values.group)));
  io.out(`Created team ${team.name} (${describeLimits(team)}).\n`);
  return 0;
}

async function listTeams(argv: string[], io: CliIo, { teams }: OpenStores): Promise<number> {
  parseArgs({ args: argv, options: {}, strict: true, allowPositionals: false });
  const records = await teams.list();
  if (records.length === 0) {
    io.out('No teams yet (teams create NAME makes one).\n');
    return 0;
  }
  const rows = records.map((team) => ({
    name: team.name,
    created: team.createdAt,
    rpm: team.rpm ?? '-',
    tpm: team.tpm ?? '-',
    ...quotaAndBudgetCells(team),
    concurrency: team.concurrency ?? '-',
    cache: team.cache ?? '-',
    guardrails: team.guardrails ? team.guardrails.join(',') || 'none' : '-',
    group: team.group ?? '-',
    alerts: team.alerts ? team.alerts.join(',') || 'none' : '-',
    'end-user': describeEndUser(team.end_user),
  }));
  const limits = ['rpm', 'tpm', 'daily-tokens', 'monthly-tokens', 'daily-usd', 'monthly-usd', 'concurrency'];
  io.out(textTable(rows, ['name', 'created', ...limits, 'cache', 'guardrails', 'group', 'alerts', 'end-user']));
  return 0;
}

// `end_user` is cleared as a whole or by flag, with the end user's flags.
const CLEARABLE = new Set([
  ...TEAM_FIELDS.filter((field) => field !== 'end_user'),
  ...Object.keys(PLACE_OF),
  ...END_USER_CLEARABLE,
]);

async function updateTeam(
  argv: string[],
  io: CliIo,
  stores: OpenStores,
  guardrails?: readonly string[],
): Promise<number> {
  const { teams, groups } = stores;
  const { values, positionals } = parseArgs({
    args: argv,
    options: { ...TEAM_OPTIONS, clear: { type: 'string', multiple: true } },
    strict: true,
    allowPositionals: true,
  });
  const name = teamName(positionals, 'update');
  const cleared = new Set(values.clear ?? []);
  for (const field of cleared) {
    if (!CLEARABLE.has(field))
      throw new CliUsageError(`--clear takes one of ${[...CLEARABLE].join(', ')}; got '${field}'`);
    const setToo = field.startsWith('end-user')
      ? endUserContradiction(field, values)
      : field === 'cache' || field === 'guardrails' || field === 'group' || field === 'alerts'
        ? values[field] !== undefined
          ? field
          : undefined
        : (Object.keys(PLACE_OF) as LimitFlag[]).find(
            (flag) => values[flag] !== undefined && (flag === field || PLACE_OF[flag][0] === field),
          );
    if (setToo) throw new CliUsageError(`--clear ${field} and --${setToo} contradict each other`);
  }
  const current = await teams.get(name);
  if (!current) return noneNamed(io, 'team', name);
  const body = changesOf(values, cleared, current);
  const knownGroups = await knownGroup(groups, values.group);
  const updated = await teams.update(name, parseTeamChanges(body, flagOf, guardrails, knownGroups));
  if (!updated) return noneNamed(io, 'team', name);
  io.out(`Updated team ${name} (${describeLimits(updated)}); every gateway instance applies it within seconds.\n`);
  return 0;
}

/** Deletes a team as the admin API does, emptying its response cache entries on Redis (see `deleteTeam`). */
async function removeTeam(argv: string[], io: CliIo, stores: OpenStores): Promise<number> {
  const { positionals } = parseArgs({ args: argv, options: {}, strict: true, allowPositionals: true });
  const name = teamName(positionals, 'delete');
  const emptied = await deleteTeam(name, stores, operatorCache(stores));
  if (emptied === undefined) return noneNamed(io, 'team', name);
  const emptiedToo = stores.redis ? ` (${entries(emptied)} of its response cache emptied)` : '';
  io.out(`Deleted team ${name}${emptiedToo}.\n`);
  return 0;
}

function describeLimits(team: TeamRecord): string {
  const parts = [
    team.rpm !== undefined && `rpm ${team.rpm}`,
    team.tpm !== undefined && `tpm ${team.tpm}`,
    ...describeQuotaAndBudget(team),
    team.concurrency !== undefined && `at most ${team.concurrency} requests at once`,
    team.cache !== undefined && `cache ${team.cache}`,
    team.guardrails !== undefined && `guardrails ${team.guardrails.join(', ') || 'none'}`,
    team.group !== undefined && `group ${team.group}`,
    team.end_user !== undefined && `each end user: ${describeEndUser(team.end_user)}`,
    team.alerts !== undefined && `alerts ${team.alerts.length ? `at ${team.alerts.join(', ')} %` : 'none'}`,
  ].filter(Boolean);
  return parts.length ? parts.join(', ') : 'no limits';
}

const ACTIONS: Record<
  string,
  (argv: string[], io: CliIo, stores: OpenStores, guardrails?: readonly string[]) => Promise<number>
> = {
  create: createTeam,
  list: listTeams,
  update: updateTeam,
  delete: removeTeam,
};

/**
 * `teams create|list|update|delete` on the stores the server of `env` uses (Redis, else the data directory), as `keys`
 * does.
 */
export async function runTeamsCommand(
  argv: string[],
  io: CliIo,
  env: NodeJS.ProcessEnv = process.env,
): Promise<number> {
  const [action, ...rest] = argv;
  const run = action === undefined ? undefined : ACTIONS[action];
  if (!run)
    throw new CliUsageError(action === undefined ? 'teams needs an action' : `unknown teams action '${action}'`);
  const config = loadConfig(env);
  // A team's guardrails are checked against those the configuration holds.
  return withOperatorStores(config, { unreachableRedis: 'fail' }, (stores) =>
    run(
      rest,
      io,
      stores,
      config.guardrails.map((entry) => entry.name),
    ),
  );
}
