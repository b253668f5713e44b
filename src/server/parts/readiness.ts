import type { RequestHandler } from 'express';
import { type RedisConnection, answersWithin } from '../../stores/redis/redis-client.ts';
import type { LimitLedger } from '../../usage/limit-ledger.ts';
import type { UsageStore } from '../../usage/usage-accounting.ts';
import type { Configuration } from './configuration.ts';

/** What `/readyz` and the account page's health view say of the gateway. */
export interface Readiness {
  read(): Promise<ReadinessBody>;
  /** `GET /readyz`. */
  readonly route: RequestHandler;
  /** From now on the gateway shuts down: never ready again. */
  draining(): void;
}

export type ReadinessBody = Awaited<ReturnType<typeof readinessOf>>;

async function readinessOf(
  stores: { redis?: RedisConnection; usage: UsageStore; ledger: LimitLedger },
  configuration: Configuration,
  draining: boolean,
) {
  const { redis, usage, ledger } = stores;
  const { live } = configuration;
  // Asks Redis itself, so a stall shows (and clears) without any model request.
  const redisState = redis ? ((await answersWithin(redis, 250)) ? 'ready' : 'unavailable') : 'not configured';
  const degraded = ledger.degraded() || !usage.healthy || redisState === 'unavailable';
  return {
    status: draining ? 'shutting down' : degraded ? 'degraded' : 'ok',
    redis: redisState,
    rate_limits: redis && !ledger.degraded() ? 'shared' : 'per-process',
    usage: usage.healthy ? 'stored' : 'queued until the store returns',
    config_version: live.current.version,
    // A refused reload leaves the previous configuration serving (still ready), stale until a reload
    // applies; the error says where the file is wrong, never what it holds (/readyz takes no credential).
    config_stale: live.lastError !== undefined,
    ...(live.lastError === undefined ? {} : { config_error: live.lastError }),
  };
}

/**
 * Ready while nothing runs degraded: 503 otherwise (and while draining), so a balancer prefers healthy
 * instances. `?degraded=ready` answers 200 while degraded: for an orchestrator that takes every unready
 * replica out of service, where a shared Redis outage would otherwise stop all of them at once.
 */
export function readiness(
  stores: { redis?: RedisConnection; usage: UsageStore; ledger: LimitLedger },
  configuration: Configuration,
): Readiness {
  let draining = false;
  const read = () => readinessOf(stores, configuration, draining);
  return {
    read,
    route: async (req, res) => {
      const body = await read();
      const ready = body.status === 'ok' || (body.status === 'degraded' && req.query.degraded === 'ready');
      res.status(ready ? 200 : 503).json(body);
    },
    draining: () => void (draining = true),
  };
}
