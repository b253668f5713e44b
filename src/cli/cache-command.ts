import { parseArgs } from 'node:util';
import { loadConfig } from '../config/gateway-config.ts';
import { clearResponseCache, type CacheClearTarget, type EmptiedCache } from '../control-plane/admin/cache-routes.ts';
import type { ResponseCache } from '../core/response-cache.ts';
import type { OpenStores } from '../stores/open-stores.ts';
import { createLogger } from '../core/logger.ts';
import { RedisResponseCache } from '../stores/cache/redis-response-cache.ts';
import { accessResponseCache } from '../control-plane/access/access-stores.ts';
import { withOperatorStores } from './operator-stores.ts';
import { CliUsageError, type CliIo } from './cli-io.ts';

export const CACHE_SYNOPSIS = 'cache clear [--key KEY_ID | --team NAME]';

/** Without Redis the entries live in the server's memory, which no other process can reach. */
export const EMBEDDED_CACHE_HINT =
  "Without REDIS_URL the response cache lives in the running gateway's memory, out of this command's reach: empty it with DELETE /admin/cache on the gateway (the admin API), or restart the gateway.\n";

function targetOf(argv: string[]): CacheClearTarget {
  const { values, positionals } = parseArgs({
    args: argv,
    options: { key: { type: 'string' }, team: { type: 'string' } },
    strict: true,
    allowPositionals: true,
  });
  if (positionals.length > 0) throw new CliUsageError(`cache clear takes no arguments (got '${positionals[0]}')`);
  if (values.key !== undefined && values.team !== undefined)
    throw new CliUsageError('cache clear takes --key or --team, not both (neither empties every entry)');
  if (values.key === '' || values.team === '')
    throw new CliUsageError(`--${values.key === '' ? 'key' : 'team'} needs a value`);
  return values.key !== undefined ? { keyId: values.key } : values.team !== undefined ? { team: values.team } : {};
}

/** The response cache on the Redis the server uses, its clears recorded as the operator's; none without Redis. */
export function operatorCache(stores: Pick<OpenStores, 'redis'>): (ResponseCache & EmptiedCache) | undefined {
  return stores.redis && accessResponseCache(new RedisResponseCache(stores.redis, { logger: createLogger('silent') }));
}

/** `1 entry`, `3 entries`. */
export const entries = (count: number): string => `${count} ${count === 1 ? 'entry' : 'entries'}`;

function whose(target: CacheClearTarget, tenant: string | null): string {
  if (tenant === null) return 'of every key and team';
  if (target.keyId !== undefined && tenant.startsWith('team:'))
    return `of team ${tenant.slice('team:'.length)}, whose entries key ${target.keyId} shares`;
  return `of ${tenant.replace(':', ' ')}`;
}

/**
 * `cache clear [--key KEY_ID | --team NAME]`: empties the response cache in the Redis the server uses
 * (every entry, a key's tenant, which is its team's when it names one, or a team's), after the key or
 * team is looked up in the stores. Without Redis the entries are in the server's memory: it says to use
 * `DELETE /admin/cache` and exits 1.
 */
export async function runCacheCommand(
  argv: string[],
  io: CliIo,
  env: NodeJS.ProcessEnv = process.env,
): Promise<number> {
  const [action, ...rest] = argv;
  if (action !== 'clear')
    throw new CliUsageError(action === undefined ? 'cache needs an action' : `unknown cache action '${action}'`);
  const target = targetOf(rest);
  const config = loadConfig(env);
  if (!config.redis) {
    io.err(EMBEDDED_CACHE_HINT);
    return 1;
  }
  const logger = createLogger('silent');
  return withOperatorStores(config, { unreachableRedis: 'fail', logger }, async (stores) => {
    const cache = operatorCache(stores)!;
    const { deleted, tenant } = await clearResponseCache(target, stores, cache);
    io.out(`Deleted ${deleted} response cache ${deleted === 1 ? 'entry' : 'entries'} ${whose(target, tenant)}.\n`);
    return 0;
  });
}
