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
  let redis: RedisConnection | undefined;
  if (config.redis) {
    redis = createRedisClient(config.redis, logger);
    const timeoutMs = options.timeoutMs ?? 3000;
    if (!(await waitUntilReady(redis, timeoutMs))) {
      if (options.unreachableRedis === 'fail') {
        redis.disconnect();
        throw new Error(`Redis is not reachable (waited ${timeoutMs} ms); the keys live there`);
      }
      logger.warn('redis: not reachable at start; serving degraded until it is');
    }
  }
  const keys: KeyStore = redis
    ? new RedisKeyStore(redis, { failMode: config.authFailMode, graceMs: config.authGraceMs })
    : new FileKeyStore(config.dataDir);
  const teams: TeamStore = redis ? new RedisTeamStore(redis) : new FileTeamStore(config.dataDir);
  const groups: GroupStore = redis ? new RedisGroupStore(redis) : new FileGroupStore(config.dataDir);
  const guardrailActions: GuardrailActionLog = redis
    ? new RedisGuardrailActionLog(redis, { logger })
    : new EmbeddedGuardrailActionLog();
  const tokens: TokenStore = redis ? new RedisTokenStore(redis) : new FileTokenStore(config.dataDir);
  const audit: AuditStore = redis ? new RedisAuditStore(redis) : new FileAuditStore(config.dataDir);
  const alerts: AlertLog = redis ? new RedisAlertLog(redis, logger) : new EmbeddedAlertLog();
  let usage: UsageStore | undefined;
  if (options.usage) {
    const inner = redis
      ? await RedisUsageStore.open(redis, { dataDir: config.dataDir, logger })
      : await EmbeddedUsageStore.open(config.dataDir, logger);
    usage = config.apiKeys.length
      ? new KeyIdAliases(inner, () =>
          legacyAliases(config.apiKeys, config.keyIdSecret, { redis, dataDir: config.dataDir }),
        )
      : inner;
  }
  let ledger: LimitLedger | undefined;
  if (options.limits === 'serve')
    ledger = redis ? new FallbackLedger(redis, { logger }) : await EmbeddedLedger.open(config.dataDir, logger);
  else if (options.limits === 'read')
    ledger = redis ? new RedisLedger(redis, { logger }) : await EmbeddedLedger.open(config.dataDir, logger);
  return {
    redis,
    keys,
    teams,
    groups,
    guardrailActions,
    tokens,
    audit,
    alerts,
    usage,
    ledger,
    async close() {
      await usage?.close();
      await ledger?.close();
      await keys.close();
      await teams.close();
      await groups.close();
      await guardrailActions.close();
      await tokens.close();
      await audit.close();
      await alerts.close();
      // QUIT lets commands already sent finish; a connection still trying has nothing to finish.
      if (redis?.status === 'ready') await redis.quit().catch(() => redis.disconnect());
      else redis?.disconnect();
    },
  };
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
