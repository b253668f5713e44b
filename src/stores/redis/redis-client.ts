import { createRequire } from 'node:module';
import type { Cluster, ClusterOptions, Redis, RedisOptions } from 'ioredis';
import { pino, type Logger } from 'pino';

export type RedisConnection = Redis | Cluster;

export interface RedisAddress {
  readonly host: string;
  readonly port: number;
}

/**
 * Where Redis is: a `redis://` or `rediss://` (TLS) URL, Sentinel (`sentinels` plus the master's
 * `sentinelName`, or `name`), or a Cluster's startup nodes. The gateway config's `redis` settings fit.
 */
export type RedisTarget =
  | string
  | {
      readonly url?: string;
      readonly sentinels?: readonly RedisAddress[];
      readonly sentinelName?: string;
      readonly name?: string;
      readonly cluster?: readonly RedisAddress[];
    };

/** Connection state of one client, as the rate limits, key store and readiness endpoint see it. */
export interface RedisHealth {
  /** True while the client can send commands. */
  readonly ready: boolean;
}

const backoff = (attempt: number) => Math.min(50 * 2 ** Math.min(attempt, 6), 2000);

// Short timeouts and no offline queue: while Redis is away a command fails at once, and each caller
// falls back (rate limits to memory, usage to its queue) instead of holding requests.
const NODE_OPTIONS: RedisOptions = {
  connectTimeout: 1000,
  commandTimeout: 500,
  maxRetriesPerRequest: 1,
  enableOfflineQueue: false,
  retryStrategy: backoff,
};

// Cluster nodes reconnect through the cluster (slot refresh), not through their own retry strategy.
const CLUSTER_OPTIONS: ClusterOptions = {
  enableOfflineQueue: false,
  clusterRetryStrategy: backoff,
  slotsRefreshTimeout: 1000,
  redisOptions: { connectTimeout: 1000, commandTimeout: 500, maxRetriesPerRequest: 1 },
};

/** Whether a connection is a Redis Cluster (without loading ioredis to ask `instanceof`). */
export function isCluster(client: RedisConnection): client is Cluster {
  return client.isCluster;
}

const trackers = new WeakMap<RedisConnection, RedisHealth>();

/**
 * One Redis connection for the gateway: URL (TLS with `rediss://`), Sentinel or Cluster, failing fast
 * and reconnecting forever with a backoff capped at 2 s. Logs `redis unavailable` and `redis back`
 * once per transition.
 */
export function createRedisClient(target: RedisTarget, logger: Logger = pino({ level: 'silent' })): RedisConnection {
  // Loaded on first use: a gateway without Redis never holds ioredis (about 6 MB of its idle RSS).
  const { Cluster, Redis } = createRequire(import.meta.url)('ioredis') as typeof import('ioredis');
  let client: RedisConnection;
  if (typeof target === 'string') {
    client = new Redis(target, NODE_OPTIONS);
  } else if (target.cluster?.length) {
    client = new Cluster(
      target.cluster.map((node) => ({ ...node })),
      CLUSTER_OPTIONS,
    );
  } else if (target.sentinels?.length) {
    const name = target.sentinelName ?? target.name;
    if (!name) throw new Error('Redis Sentinel needs the name of the master set (sentinelName)');
    client = new Redis({ ...NODE_OPTIONS, sentinels: target.sentinels.map((node) => ({ ...node })), name });
  } else if (target.url) {
    client = new Redis(target.url, NODE_OPTIONS);
  } else {
    throw new Error('Redis settings need a url, sentinels or cluster nodes');
  }
  trackHealth(client, logger);
  return client;
}

function trackHealth(client: RedisConnection, logger: Logger): void {
  const health = { ready: false };
  let known: 'up' | 'down' | undefined;
  const down = (error?: Error) => {
    health.ready = false;
    if (known === 'down') return;
    known = 'down';
    // The message only: an error object may carry the connection options, password included.
    logger.warn({ reason: error?.message ?? `connection ${client.status}` }, 'redis unavailable');
  };
  client.on('ready', () => {
    health.ready = true;
    if (known === 'down') logger.info('redis back');
    known = 'up';
  });
  client.on('reconnecting', () => down());
  client.on('end', () => {
    health.ready = false;
  });
  client.on('error', (error: Error) => {
    if (client.status !== 'ready') down(error);
  });
  trackers.set(client, health);
}

/** The health of a client made by {@link createRedisClient}. */
export function redisHealth(client: RedisConnection): RedisHealth {
  return trackers.get(client) ?? { ready: client.status === 'ready' };
}

export function isReady(client: RedisConnection): boolean {
  return client.status === 'ready';
}

/** Waits (bounded) for the first connection, so a fresh process does not start out degraded; false on timeout. */
export async function waitUntilReady(client: RedisConnection, timeoutMs: number): Promise<boolean> {
  if (isReady(client)) return true;
  return new Promise((resolve) => {
    const timer = setTimeout(() => {
      client.off('ready', onReady);
      resolve(false);
    }, timeoutMs);
    const onReady = () => {
      clearTimeout(timer);
      resolve(true);
    };
    client.once('ready', onReady);
  });
}

/** True when the client is connected and Redis answers a PING within `timeoutMs` (false during a stall). */
export async function answersWithin(client: RedisConnection, timeoutMs: number): Promise<boolean> {
  if (!isReady(client)) return false;
  let timer: NodeJS.Timeout | undefined;
  const ping = client.ping().then(
    () => true,
    () => false,
  );
  const late = new Promise<boolean>((resolve) => {
    timer = setTimeout(() => resolve(false), timeoutMs);
  });
  try {
    return await Promise.race([ping, late]);
  } finally {
    clearTimeout(timer);
  }
}
