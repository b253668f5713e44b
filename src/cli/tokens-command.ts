import { parseArgs } from 'node:util';
import { loadConfig } from '../config/gateway-config.ts';
import { parseNewToken, tokenView } from '../control-plane/access/token-routes.ts';
import { actorOf } from '../core/access.ts';
import { changed, currentScope } from '../control-plane/access/request-scope.ts';
import type { TokenStore } from '../stores/tokens/token-store.ts';
import { namesOf } from './limit-flags.ts';
import { withOperatorStores } from './operator-stores.ts';
import { CliUsageError, type CliIo } from './cli-io.ts';
import { textTable } from './text-table.ts';

export const TOKENS_SYNOPSIS = `tokens create --name NAME --role admin|team-admin|viewer [--teams NAME,...] [--expires-at ISO]
tokens list
tokens revoke TOKEN_ID`;

const CREATE = {
  name: { type: 'string' },
  role: { type: 'string' },
  teams: { type: 'string' },
  'expires-at': { type: 'string' },
} as const;

/** `tokens create`: a new token of the role, shown once, and its record in the audit log. */
async function createToken(args: string[], tokens: TokenStore, io: CliIo): Promise<number> {
  const { values } = parseArgs({ args, options: CREATE, strict: true, allowPositionals: false });
  const input = parseNewToken({
    name: values.name,
    role: values.role,
    ...(values.teams !== undefined && { teams: namesOf(values.teams) }),
    ...(values['expires-at'] !== undefined && { expires_at: values['expires-at'] }),
  });
  const actor = actorOf(currentScope()!.principal);
  const { token, record } = await tokens.create({ ...input, createdBy: `cli:${actor.name}` });
  changed(
    'token.create',
    { type: 'token', id: record.id, team: record.grant.teams?.[0] ?? null },
    null,
    tokenView(record),
  );
  io.out(
    `Created service token ${record.id} (${record.name}, ${tokenView(record).role}), valid until ${record.expiresAt}.\nToken, shown this once; store it now:\n${token}\n`,
  );
  return 0;
}

/** `tokens list`: every token, revoked and expired ones too, as a table. */
async function listTokens(args: string[], tokens: TokenStore, io: CliIo): Promise<number> {
  parseArgs({ args, options: {}, strict: true, allowPositionals: false });
  const views = (await tokens.list()).map((record) => tokenView(record));
  if (views.length === 0) io.out('No service tokens yet (tokens create --name NAME --role ROLE makes one).\n');
  else
    io.out(
      textTable(
        views.map((view) => ({ ...view, teams: view.teams?.join(',') ?? 'all' })),
        ['id', 'name', 'role', 'teams', 'status', 'created_at', 'expires_at', 'created_by'],
      ),
    );
  return 0;
}

/** `tokens revoke TOKEN_ID`: the admin API refuses the token from then on; the audit log keeps the change. */
async function revokeToken(args: string[], tokens: TokenStore, io: CliIo): Promise<number> {
  const { positionals } = parseArgs({ args, options: {}, strict: true, allowPositionals: true });
  if (positionals.length !== 1) throw new CliUsageError('tokens revoke needs exactly one token id (see tokens list)');
  const id = positionals[0]!;
  const record = (await tokens.list()).find((each) => each.id === id);
  if (!record || !(await tokens.revoke(id))) {
    io.err(`No service token with id '${id}' (see tokens list)\n`);
    return 1;
  }
  changed(
    'token.revoke',
    { type: 'token', id, team: record.grant.teams?.[0] ?? null },
    tokenView(record),
    tokenView({ ...record, revoked: true }),
  );
  io.out(`Revoked ${id}; the admin API refuses it at once.\n`);
  return 0;
}

const ACTIONS = { create: createToken, list: listTokens, revoke: revokeToken } as const;

/**
 * `tokens create|list|revoke`: service tokens for the admin API (`Authorization: Bearer gwt_…`), each
 * with a role, on the store the server uses. The token is shown once; only its hash is stored.
 */
export async function runTokensCommand(
  argv: string[],
  io: CliIo,
  env: NodeJS.ProcessEnv = process.env,
): Promise<number> {
  const [action, ...rest] = argv;
  if (action === undefined || !Object.hasOwn(ACTIONS, action))
    throw new CliUsageError(action === undefined ? 'tokens needs an action' : `unknown tokens action '${action}'`);
  const run = ACTIONS[action as keyof typeof ACTIONS];
  return withOperatorStores(loadConfig(env), { unreachableRedis: 'fail' }, ({ tokens }) => run(rest, tokens, io));
}
