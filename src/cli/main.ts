import { parseArgs } from 'node:util';
import { publicView } from '../auth/api-keys.ts';
import { checkNewKey } from '../admin/admin-routes.ts';
import { ConfigError, loadConfig } from '../config/gateway-config.ts';
import { openStores } from '../gateway.ts';
import { createLogger } from '../logger.ts';
import { loadPlugins } from '../plugins/load-plugins.ts';
import { ModelRegistry } from '../plugins/model-registry.ts';
import type { UsageStore } from '../usage/usage-store.ts';
import type { KeyStore } from '../auth/key-store.ts';
import { GatewayError } from '../errors/gateway-errors.ts';

export interface CliOutput {
  out(text: string): void;
  err(text: string): void;
}

interface Stores {
  keys: KeyStore;
  usage: UsageStore;
  registry: ModelRegistry;
}

type Command = (args: string[], io: CliOutput, stores: Stores) => Promise<number>;

const HELP = `model-gateway: operator commands (they use REDIS_URL, else the data directory GATEWAY_DATA_DIR)

  keys create --name NAME [--rpm N] [--models ID,...] [--expires-at ISO] [--daily-tokens N] [--monthly-tokens N]
  keys list
  keys revoke KEY_ID
  usage [--key KEY_ID] [--from YYYY-MM-DD] [--to YYYY-MM-DD] [--group-by model|day]
`;

/** Renders rows as an aligned text table. */
export function table(rows: Record<string, unknown>[], columns: string[]): string {
  const cells = [columns, ...rows.map((row) => columns.map((column) => (row[column] === undefined ? '' : String(row[column]))))];
  const widths = columns.map((_, index) => Math.max(...cells.map((line) => line[index]!.length)));
  return `${cells.map((line) => line.map((cell, index) => cell.padEnd(widths[index]!)).join('  ').trimEnd()).join('\n')}\n`;
}

const integer = (value: string | undefined) => (value === undefined ? undefined : Number(value));

const commands: Record<string, Command> = {
  'keys create': async (args, io, stores) => {
    const { values } = parseArgs({
      args,
      options: { name: { type: 'string' }, rpm: { type: 'string' }, models: { type: 'string' }, 'expires-at': { type: 'string' }, 'daily-tokens': { type: 'string' }, 'monthly-tokens': { type: 'string' } },
    });
    const daily = integer(values['daily-tokens']);
    const monthly = integer(values['monthly-tokens']);
    const body = checkNewKey(
      {
        name: values.name,
        ...(values.rpm === undefined ? {} : { rpm: integer(values.rpm) }),
        ...(values.models === undefined ? {} : { models: values.models.split(',').map((model) => model.trim()).filter(Boolean) }),
        ...(values['expires-at'] === undefined ? {} : { expires_at: values['expires-at'] }),
        ...(daily === undefined && monthly === undefined ? {} : { quota: { ...(daily === undefined ? {} : { daily }), ...(monthly === undefined ? {} : { monthly }) } }),
      },
      stores.registry,
    );
    const { key, record } = await stores.keys.create({ name: body.name, rpm: body.rpm, models: body.models, expiresAt: body.expires_at ? new Date(body.expires_at).toISOString() : undefined, quota: body.quota });
    io.out(`Created key ${record.id} (${record.name}). The key is shown once, store it now:\n${key}\n`);
    return 0;
  },
  'keys list': async (_args, io, stores) => {
    const rows = (await stores.keys.list()).map((record) => {
      const view = publicView(record);
      return { ...view, models: view.models?.join(',') ?? 'all', status: view.revoked ? 'revoked' : view.expiresAt && Date.parse(view.expiresAt) <= Date.now() ? 'expired' : 'active' };
    });
    io.out(table(rows, ['id', 'name', 'status', 'createdAt', 'expiresAt', 'rpm', 'models']));
    return 0;
  },
  'keys revoke': async (args, io, stores) => {
    const id = args[0];
    if (!id) throw new GatewayError('CLI_USAGE', 400, 'invalid_request', 'keys revoke needs a key id (see keys list)');
    if (!(await stores.keys.revoke(id))) {
      io.err(`No key with id '${id}'\n`);
      return 1;
    }
    io.out(`Revoked ${id}; every gateway instance refuses it within a second.\n`);
    return 0;
  },
  usage: async (args, io, stores) => {
    const { values } = parseArgs({ args, options: { key: { type: 'string' }, from: { type: 'string' }, to: { type: 'string' }, 'group-by': { type: 'string', default: 'model' } } });
    const groupBy = values['group-by'];
    if (groupBy !== 'model' && groupBy !== 'day') throw new GatewayError('CLI_USAGE', 400, 'invalid_request', "--group-by must be 'model' or 'day'");
    const rows = await stores.usage.query({ keyId: values.key, fromDay: values.from?.slice(0, 10), toDay: values.to?.slice(0, 10), groupBy });
    io.out(table(rows as unknown as Record<string, unknown>[], [groupBy, 'requests', 'input_tokens', 'output_tokens', 'cached_tokens', 'total_tokens', 'charged_tokens', 'cost_usd']));
    return 0;
  },
};

/** Runs one CLI command; returns the process exit code. */
export async function runCli(argv: string[], io: CliOutput, env: NodeJS.ProcessEnv = process.env): Promise<number> {
  const name = [`${argv[0]} ${argv[1]}`, argv[0]].find((candidate) => candidate !== undefined && candidate in commands);
  if (!name) {
    io.out(HELP);
    return argv.length === 0 || argv[0] === 'help' || argv[0] === '--help' ? 0 : 1;
  }
  let stores: Stores | undefined;
  try {
    const config = loadConfig(env);
    const logger = createLogger('silent');
    const { redis, keys, usage } = await openStores(config, logger);
    stores = { keys, usage, registry: new ModelRegistry(await loadPlugins(config.manifestPath), config.aliases) };
    const code = await commands[name]!(argv.slice(name.split(' ').length), io, stores);
    await usage.close();
    redis?.disconnect();
    return code;
  } catch (error) {
    if (error instanceof GatewayError) io.err(`${[error.detail, ...(error.errors ?? [])].join('\n  ')}\n`);
    else if (error instanceof ConfigError || (error as { code?: string }).code?.startsWith('ERR_PARSE_ARGS')) io.err(`${(error as Error).message}\n`);
    else throw error;
    return 1;
  }
}
