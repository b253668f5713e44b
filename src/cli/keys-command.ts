import { parseArgs } from 'node:util';
import { parseKeyChanges, parseNewKey } from '../control-plane/admin/new-key-input.ts';
import { canonicalModelIds } from '../control-plane/admin/admin-routes.ts';
import { revokeKey } from '../control-plane/admin/key-routes.ts';
import { keyStatus, type ApiKeyRecord } from '../core/api-keys.ts';
import type { OpenStores } from '../stores/open-stores.ts';
import { withOperatorStores } from './operator-stores.ts';
import { isTeamName } from '../core/team-name.ts';
import { knownGroup } from '../control-plane/admin/key-routes.ts';
import { loadConfig } from '../config/gateway-config.ts';
import { loadPlugins } from '../plugins/load-plugins.ts';
import { ModelRegistry } from '../core/model-registry.ts';
import { CliUsageError, type CliIo } from './cli-io.ts';
import { entries, operatorCache } from './cache-command.ts';
import { textTable } from './text-table.ts';
import {
  booleanOf,
  LIMIT_FLAGS,
  namesOf,
  numberOf,
  pairOf,
  percentsOf,
  quotaAndBudgetChanges,
  sidesOf,
} from './limit-flags.ts';
import {
  describeEndUser,
  END_USER_CLEARABLE,
  END_USER_OPTIONS,
  END_USER_SYNOPSIS,
  endUserChangeOf,
  endUserContradiction,
  endUserOfFlags,
} from './end-user-flags.ts';

export const KEYS_SYNOPSIS = `keys create --name NAME [--rpm N] [--concurrency N] [--models ID,...] [--expires-at ISO] [--daily-tokens N] [--monthly-tokens N] [--tpm N] [--daily-usd X] [--monthly-usd Y] [--team NAME] [--group NAME] [--cache true|false] [--guardrails NAME,... ('' for none)] [--alerts PERCENT,... ('' for none)] ${END_USER_SYNOPSIS}
keys update KEY_ID [--name NAME] [the limit flags of keys create] [--clear rpm|tpm|quota|budget|concurrency|models|expires-at|team|group|cache|guardrails|alerts|daily-tokens|monthly-tokens|daily-usd|monthly-usd|end-user|end-user-rpm|...]...
keys list
keys revoke KEY_ID`;

const CREATE_OPTIONS = {
  name: { type: 'string' },
  rpm: { type: 'string' },
  concurrency: { type: 'string' },
  models: { type: 'string' },
  'expires-at': { type: 'string' },
  'daily-tokens': { type: 'string' },
  'monthly-tokens': { type: 'string' },
  tpm: { type: 'string' },
  'daily-usd': { type: 'string' },
  'monthly-usd': { type: 'string' },
  team: { type: 'string' },
  group: { type: 'string' },
  cache: { type: 'string' },
  guardrails: { type: 'string' },
  ...END_USER_OPTIONS,
  alerts: { type: 'string' },
} as const;

const FLAG_OF: Record<string, string> = { ...LIMIT_FLAGS, expires_at: '--expires-at' };
const flagOf = (path: string) => FLAG_OF[path] ?? `--${path}`;

async function createKey(argv: string[], io: CliIo, stores: OpenStores, env: NodeJS.ProcessEnv): Promise<number> {
  const { keys: store, teams, groups } = stores;
  const { values } = parseArgs({ args: argv, options: CREATE_OPTIONS, strict: true, allowPositionals: false });
  const models = values.models
    ?.split(',')
    .map((model) => model.trim())
    .filter(Boolean);
  const quota = pairOf(['daily', numberOf(values['daily-tokens'])], ['monthly', numberOf(values['monthly-tokens'])]);
  const budget = pairOf(['daily_usd', numberOf(values['daily-usd'])], ['monthly_usd', numberOf(values['monthly-usd'])]);
  const body = {
    name: values.name,
    ...(values.rpm !== undefined && { rpm: numberOf(values.rpm) }),
    ...(values.concurrency !== undefined && { concurrency: numberOf(values.concurrency) }),
    ...(models && { models }),
    ...(values['expires-at'] !== undefined && { expires_at: values['expires-at'] }),
    ...(quota && { quota }),
    ...(values.tpm !== undefined && { tpm: numberOf(values.tpm) }),
    ...(budget && { budget }),
    ...(values.team !== undefined && { team: values.team }),
    ...(values.group !== undefined && { group: values.group }),
    ...(values.cache !== undefined && { cache: booleanOf(values.cache) }),
    ...(values.guardrails !== undefined && { guardrails: namesOf(values.guardrails) }),
    ...(values.alerts !== undefined && { alerts: percentsOf(values.alerts) }),
  };
  const endUser = endUserOfFlags(values);
  if (endUser) Object.assign(body, { end_user: endUser });
  const config = models || values.guardrails !== undefined ? loadConfig(env) : undefined;
  const known =
    config && models
      ? canonicalModelIds(new ModelRegistry(await loadPlugins(config.manifestPath, config.pluginPath)))
      : undefined;
  const knownGuardrails =
    config && values.guardrails !== undefined ? config.guardrails.map((entry) => entry.name) : undefined;
  const knownTeams = await teamIdByName(teams, values.team);
  const knownGroups = await knownGroup(groups, values.group);
  const check = { knownModels: known, knownTeams, knownGroups, knownGuardrails, fieldLabel: flagOf };
  const { key, record } = await store.create(parseNewKey(body, check));
  io.out(`Created API key ${record.id} (${record.name}).\nKey, shown this once; store it now:\n${key}\n`);
  return 0;
}

/** The team `--team` names, with its id, when it exists (none known otherwise: naming it is then refused). */
async function teamIdByName(teams: OpenStores['teams'], name: string | undefined): Promise<Map<string, string>> {
  const team = isTeamName(name) ? await teams.get(name) : undefined;
  return new Map(team ? [[team.name, team.id]] : []);
}

/** What `keys update --clear` takes: a whole field, or one side of `quota` / `budget`. */
const CLEARABLE = [
  'rpm',
  'tpm',
  'quota',
  'budget',
  'concurrency',
  'models',
  'expires-at',
  'team',
  'group',
  'cache',
  'guardrails',
  'alerts',
  'daily-tokens',
  'monthly-tokens',
  'daily-usd',
  'monthly-usd',
  ...END_USER_CLEARABLE,
] as const;
type UpdateValues = Partial<Record<keyof typeof CREATE_OPTIONS, string>>;

/**
 * The PATCH the flags make of a key: a flag given sets its field, a field cleared is null. A side of
 * `quota` or `budget` (`--daily-usd`, `--clear monthly-tokens`) changes that side only, keeping the other as
 * the key has it; a limit left with neither side is removed.
 */
function keyChangesOf(
  values: UpdateValues,
  cleared: ReadonlySet<string>,
  current: ApiKeyRecord,
): Record<string, unknown> {
  const body: Record<string, unknown> = {};
  if (values.name !== undefined) body.name = values.name;
  for (const field of ['rpm', 'tpm', 'concurrency'] as const) {
    if (cleared.has(field)) body[field] = null;
    else if (values[field] !== undefined) body[field] = numberOf(values[field]);
  }
  if (cleared.has('models')) body.models = null;
  else if (values.models !== undefined) body.models = namesOf(values.models);
  if (cleared.has('expires-at')) body.expires_at = null;
  else if (values['expires-at'] !== undefined) body.expires_at = values['expires-at'];
  if (cleared.has('team')) body.team = null;
  else if (values.team !== undefined) body.team = values.team;
  if (cleared.has('group')) body.group = null;
  else if (values.group !== undefined) body.group = values.group;
  if (cleared.has('cache')) body.cache = null;
  else if (values.cache !== undefined) body.cache = booleanOf(values.cache);
  if (cleared.has('guardrails')) body.guardrails = null;
  else if (values.guardrails !== undefined) body.guardrails = namesOf(values.guardrails);
  if (cleared.has('alerts')) body.alerts = null;
  else if (values.alerts !== undefined) body.alerts = percentsOf(values.alerts);
  Object.assign(body, quotaAndBudgetChanges(values, cleared, current));
  const endUser = endUserChangeOf(values, cleared, current.end_user);
  if (endUser !== undefined) body.end_user = endUser;
  return body;
}

async function updateKey(argv: string[], io: CliIo, stores: OpenStores, env: NodeJS.ProcessEnv): Promise<number> {
  const { keys: store, teams, groups } = stores;
  const { values, positionals } = parseArgs({
    args: argv,
    options: { ...CREATE_OPTIONS, clear: { type: 'string', multiple: true } },
    strict: true,
    allowPositionals: true,
  });
  if (positionals.length !== 1) throw new CliUsageError('keys update needs exactly one key id (see keys list)');
  const id = positionals[0]!;
  const cleared = new Set(values.clear ?? []);
  for (const field of cleared) {
    if (!(CLEARABLE as readonly string[]).includes(field))
      throw new CliUsageError(`--clear takes one of ${CLEARABLE.join(', ')}; got '${field}'`);
    const flags = field === 'quota' || field === 'budget' ? sidesOf(field) : [field];
    const setToo = field.startsWith('end-user')
      ? endUserContradiction(field, values)
      : flags.find((flag) => values[flag as keyof UpdateValues] !== undefined);
    if (setToo) throw new CliUsageError(`--clear ${field} and --${setToo} contradict each other`);
  }
  const current = (await store.list()).find((record) => record.id === id);
  if (!current) {
    io.err(`No API key with id '${id}' (see keys list)\n`);
    return 1;
  }
  const body = keyChangesOf(values, cleared, current);
  const models = Array.isArray(body.models) && body.models.length > 0;
  const config = models || Array.isArray(body.guardrails) ? loadConfig(env) : undefined;
  const known =
    config && models
      ? canonicalModelIds(new ModelRegistry(await loadPlugins(config.manifestPath, config.pluginPath)))
      : undefined;
  const knownGuardrails =
    config && Array.isArray(body.guardrails) ? config.guardrails.map((entry) => entry.name) : undefined;
  const knownTeams = await teamIdByName(teams, values.team);
  const knownGroups = await knownGroup(groups, values.group);
  const check = { knownModels: known, knownTeams, knownGroups, knownGuardrails, fieldLabel: updateFlagOf };
  const updated = await store.update(id, parseKeyChanges(body, check));
  if (!updated) {
    io.err(`No API key with id '${id}' (see keys list)\n`);
    return 1;
  }
  io.out(`Updated API key ${id} (${updated.name}); every gateway instance applies it within a second.\n`);
  return 0;
}

const updateFlagOf = (path: string) => (path === 'body' ? 'flags' : flagOf(path));

async function listKeys(argv: string[], io: CliIo, { keys: store }: OpenStores): Promise<number> {
  parseArgs({ args: argv, options: {}, strict: true, allowPositionals: false });
  const records = await store.list();
  if (records.length === 0) {
    io.out('No API keys yet (keys create --name NAME makes one).\n');
    return 0;
  }
  const rows = records.map((record) => ({
    id: record.id,
    name: record.name,
    status: keyStatus(record),
    created: record.createdAt,
    expires: record.expiresAt ?? 'never',
    rpm: record.rpm ?? 'default',
    concurrency: record.concurrency ?? 'default',
    models: record.models?.join(',') ?? 'all',
    team: record.team ?? '-',
    group: record.group ?? '-',
    cache: record.cache ?? 'default',
    guardrails: record.guardrails ? record.guardrails.join(',') || 'none' : 'default',
    'end-user': describeEndUser(record.end_user),
    alerts: record.alerts ? record.alerts.join(',') || 'none' : 'default',
  }));
  const columns = ['id', 'name', 'status', 'created', 'expires', 'rpm', 'concurrency', 'models', 'team', 'group'];
  io.out(textTable(rows, [...columns, 'cache', 'guardrails', 'alerts', 'end-user']));
  return 0;
}

/** Revokes a key as the admin API does, emptying its own response cache entries on Redis (see `revokeKey`). */
async function revoke(argv: string[], io: CliIo, { keys: store, redis }: OpenStores): Promise<number> {
  const { positionals } = parseArgs({ args: argv, options: {}, strict: true, allowPositionals: true });
  if (positionals.length !== 1) throw new CliUsageError('keys revoke needs exactly one key id (see keys list)');
  const id = positionals[0]!;
  const emptied = await revokeKey(id, store, operatorCache({ redis }));
  if (emptied === undefined) {
    io.err(`No API key with id '${id}' (see keys list)\n`);
    return 1;
  }
  const emptiedToo = redis ? ` (${entries(emptied)} of its response cache emptied)` : '';
  io.out(`Revoked ${id}; every gateway instance refuses it within a second${emptiedToo}.\n`);
  return 0;
}

const ACTIONS: Record<
  string,
  (argv: string[], io: CliIo, stores: OpenStores, env: NodeJS.ProcessEnv) => Promise<number>
> = {
  create: createKey,
  update: updateKey,
  list: listKeys,
  revoke,
};

/** `keys create|update|list|revoke` on the store the server of `env` uses (Redis, else the data directory). */
export async function runKeysCommand(argv: string[], io: CliIo, env: NodeJS.ProcessEnv = process.env): Promise<number> {
  const [action, ...rest] = argv;
  const run = action === undefined ? undefined : ACTIONS[action];
  if (!run) throw new CliUsageError(action === undefined ? 'keys needs an action' : `unknown keys action '${action}'`);
  return withOperatorStores(loadConfig(env), { unreachableRedis: 'fail' }, (stores) => run(rest, io, stores, env));
}
