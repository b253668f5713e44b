import { pino, type Logger } from 'pino';
import type { GatewayConfig } from '../config/gateway-config.ts';
import { staticKeyIdAsync } from '../core/static-key-id.ts';
import { KeyIdAliases, type KeyIdAliasMap, type UsageStore } from '../usage/usage-accounting.ts';
import { EmbeddedGuardrailActionLog } from './guardrail-actions/embedded-guardrail-action-log.ts';
import type { GuardrailActionLog } from './guardrail-actions/guardrail-action-log.ts';
import { RedisGuardrailActionLog } from './guardrail-actions/redis-guardrail-action-log.ts';
import { FileKeyStore } from './keys/file-key-store.ts';
import type { KeyStore } from './keys/key-store.ts';
import { legacyStaticKeyId, readLegacySecret, type LegacySecretSource } from './keys/legacy-key-ids.ts';
import { RedisKeyStore } from './keys/redis-key-store.ts';
import { createRedisClient, waitUntilReady, type RedisConnection } from './redis/redis-client.ts';
import { FileGroupStore } from './groups/file-group-store.ts';
import type { GroupStore } from './groups/group-store.ts';
import { RedisGroupStore } from './groups/redis-group-store.ts';
import { FileTeamStore } from './teams/file-team-store.ts';
import { RedisTeamStore } from './teams/redis-team-store.ts';
import type { TeamStore } from './teams/team-store.ts';
import { EmbeddedUsageStore } from './usage/embedded-usage-store.ts';
import type { AuditStore } from './audit/audit-store.ts';
import { FileAuditStore } from './audit/file-audit-store.ts';
import { RedisAuditStore } from './audit/redis-audit-store.ts';
import type { TokenStore } from './tokens/token-store.ts';
import { FileTokenStore } from './tokens/file-token-store.ts';
import { RedisTokenStore } from './tokens/redis-token-store.ts';
import { RedisUsageStore } from './usage/redis-usage-store.ts';
import type { LimitLedger } from '../usage/limit-ledger.ts';
import { EmbeddedLedger } from './limits/embedded-ledger.ts';
import { FallbackLedger } from './limits/fallback-ledger.ts';
import { RedisLedger } from './limits/redis-ledger.ts';
import type { AlertLog } from './alerts/alert-log.ts';
import { EmbeddedAlertLog } from './alerts/embedded-alert-log.ts';
import { RedisAlertLog } from './alerts/redis-alert-log.ts';

/** The stores a process works on, with what they hold open (a Redis connection), closed together. */
export interface OpenStores<
  Usage extends UsageStore | undefined = UsageStore | undefined,
  Ledger extends LimitLedger | undefined = LimitLedger | undefined,
> {
  /** The Redis connection they use, when the config names one. */
  readonly redis?: RedisConnection;
  readonly keys: KeyStore;
  readonly teams: TeamStore;
  /** Budget groups that keys and teams draw from. */
  readonly groups: GroupStore;
  /** The newest guardrail actions: in Redis (shared) when configured, else this process's own. */
  readonly guardrailActions: GuardrailActionLog;
  /** Service tokens of the admin API. */
  readonly tokens: TokenStore;
  /** Limit alerts: which thresholds fired (claimed once across instances), the last firings, webhook deliveries. */
  readonly alerts: AlertLog;
  /** The audit log (append-only, hash-chained). */
  readonly audit: AuditStore;
  /** Present when asked for (`usage: true`). */
  readonly usage: Usage;
  /** The counters of every limit, present when asked for (`limits`). */
  readonly ledger: Ledger;
  /** Closes every store, then the Redis connection. */
  close(): Promise<void>;
}

export interface OpenStoresOptions {
  /**
   * When Redis does not answer within `timeoutMs`: `degrade` goes on with the connection still trying
   * (a server, which serves static keys and counts limits in memory meanwhile); `fail` throws (a one-shot
   * CLI command, which has nothing useful to do without it).
   */
  readonly unreachableRedis: 'degrade' | 'fail';
  /** How long to wait for Redis at first (3 s). */
  readonly timeoutMs?: number;
  /** Also open the usage store (its journal and spill files live under the data directory). */
  readonly usage?: boolean;
  /**
   * Also open the limit counters: `serve` to count on them (Redis with its fallback to process memory,
   * else the embedded counters), `read` to look at them (Redis as it stands, else the embedded files).
   */
  readonly limits?: 'serve' | 'read';
  readonly logger?: Logger;
}

type StoresConfig = Pick<
  GatewayConfig,
  'redis' | 'dataDir' | 'authFailMode' | 'authGraceMs' | 'apiKeys' | 'keyIdSecret'
>;

/**
 * The key, team and group stores, the guardrail action log, service tokens, the audit log and (when asked) the
 * usage store and the limit counters of a config, for the server and the CLI alike: in Redis when `redis` is set, else
 * the embedded files under the data directory (the action log in process). Usage read back for a static key also sums
 * what was recorded under its id of the previous scheme.
 */
export async function openStores(
  config: StoresConfig,
  options: OpenStoresOptions & { usage: true; limits: 'serve' | 'read' },
): Promise<OpenStores<UsageStore, LimitLedger>>;
export async function openStores(
  config: StoresConfig,
  options: OpenStoresOptions & { usage: true },
): Promise<OpenStores<UsageStore, undefined>>;
export async function openStores(
  config: StoresConfig,
  options: OpenStoresOptions & { limits: 'serve' | 'read' },
): Promise<OpenStores<undefined, LimitLedger>>;
export async function openStores(
  config: StoresConfig,
  options: OpenStoresOptions,
): Promise<OpenStores<undefined, undefined>>;
export async function openStores(config: StoresConfig, options: OpenStoresOptions): Promise<OpenStores> {
  const logger = options.logger ?? pino({ level: 'silent' });
  const redis = config.redis ? await connectRedis(config.redis, options, logger) : undefined;
  const stores = redis ? storesInRedis(redis, config, logger) : embeddedStores(config.dataDir);
  const usage = options.usage ? await openUsage(config, redis, logger) : undefined;
  const ledger = options.limits ? await openLedger(options.limits, config.dataDir, redis, logger) : undefined;
  const opened = { redis, ...stores, usage, ledger };
  return { ...opened, close: () => closeAll(opened) };
}

/** The stores every process opens. */
type CommonStores = Pick<OpenStores, 'keys' | 'teams' | 'groups' | 'guardrailActions' | 'tokens' | 'audit' | 'alerts'>;

/** Connects to Redis, waiting `timeoutMs` for it; unreachable, it throws or goes on as `unreachableRedis` says. */
async function connectRedis(
  settings: NonNullable<StoresConfig['redis']>,
  options: OpenStoresOptions,
  logger: Logger,
): Promise<RedisConnection> {
  const redis = createRedisClient(settings, logger);
  const timeoutMs = options.timeoutMs ?? 3000;
  if (!(await waitUntilReady(redis, timeoutMs))) {
    if (options.unreachableRedis === 'fail') {
      redis.disconnect();
      throw new Error(`Redis is not reachable (waited ${timeoutMs} ms); the keys live there`);
    }
    logger.warn('redis: not reachable at start; serving degraded until it is');
  }
  return redis;
}

function storesInRedis(redis: RedisConnection, config: StoresConfig, logger: Logger): CommonStores {
  return {
    keys: new RedisKeyStore(redis, { failMode: config.authFailMode, graceMs: config.authGraceMs }),
    teams: new RedisTeamStore(redis),
    groups: new RedisGroupStore(redis),
    guardrailActions: new RedisGuardrailActionLog(redis, { logger }),
    tokens: new RedisTokenStore(redis),
    audit: new RedisAuditStore(redis),
    alerts: new RedisAlertLog(redis, logger),
  };
}

/** The files under the data directory; the guardrail actions and the alert log in process. */
function embeddedStores(dataDir: string): CommonStores {
  return {
    keys: new FileKeyStore(dataDir),
    teams: new FileTeamStore(dataDir),
    groups: new FileGroupStore(dataDir),
    guardrailActions: new EmbeddedGuardrailActionLog(),
    tokens: new FileTokenStore(dataDir),
    audit: new FileAuditStore(dataDir),
    alerts: new EmbeddedAlertLog(),
  };
}

/** The usage store; a static key's usage read back also sums what was recorded under its id of the previous scheme. */
async function openUsage(
  config: StoresConfig,
  redis: RedisConnection | undefined,
  logger: Logger,
): Promise<UsageStore> {
  const inner = redis
    ? await RedisUsageStore.open(redis, { dataDir: config.dataDir, logger })
    : await EmbeddedUsageStore.open(config.dataDir, logger);
  if (!config.apiKeys.length) return inner;
  return new KeyIdAliases(inner, () =>
    legacyAliases(config.apiKeys, config.keyIdSecret, { redis, dataDir: config.dataDir }),
  );
}

/** The limit counters to count on (Redis with its fallback to process memory) or to look at, else the embedded ones. */
async function openLedger(
  limits: 'serve' | 'read',
  dataDir: string,
  redis: RedisConnection | undefined,
  logger: Logger,
): Promise<LimitLedger> {
  if (!redis) return EmbeddedLedger.open(dataDir, logger);
  return limits === 'serve' ? new FallbackLedger(redis, { logger }) : new RedisLedger(redis, { logger });
}

/** Closes every store, then the Redis connection. */
async function closeAll(stores: Omit<OpenStores, 'close'>): Promise<void> {
  const { redis } = stores;
  await stores.usage?.close();
  await stores.ledger?.close();
  await stores.keys.close();
  await stores.teams.close();
  await stores.groups.close();
  await stores.guardrailActions.close();
  await stores.tokens.close();
  await stores.audit.close();
  await stores.alerts.close();
  // QUIT lets commands already sent finish; a connection still trying has nothing to finish.
  if (redis?.status === 'ready') await redis.quit().catch(() => redis.disconnect());
  else redis?.disconnect();
}

/** Each static key's current id → its id under the previous scheme, where this installation had one. */
async function legacyAliases(
  staticKeys: readonly string[],
  keyIdSecret: string | undefined,
  source: LegacySecretSource,
): Promise<KeyIdAliasMap> {
  const secret = await readLegacySecret(source);
  if (!secret) return new Map();
  const pairs = await Promise.all(
    staticKeys.map(
      async (key) => [await staticKeyIdAsync(key, keyIdSecret), [legacyStaticKeyId(key, secret)]] as const,
    ),
  );
  return new Map(pairs);
}
