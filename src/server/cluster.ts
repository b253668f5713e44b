import cluster, { type Worker } from 'node:cluster';
import { availableParallelism } from 'node:os';
import type { Logger } from 'pino';
import { ConfigError, type GatewayConfig } from '../config/gateway-config.ts';
import { ClusterMetrics } from '../ops/cluster-metrics.ts';
import { boundUrlOf, serveMetrics } from '../control-plane/metrics-route.ts';

/** `GATEWAY_WORKERS`: a count, or `auto` for one per core; unset means one process, no cluster. */
export function workerCount(value: string | undefined, cores = availableParallelism()): number {
  if (value === undefined || value === '') return 1;
  if (value.trim() === 'auto') return Math.max(1, cores);
  if (!/^\d+$/.test(value.trim()) || Number(value) < 1)
    throw new ConfigError(`GATEWAY_WORKERS must be a whole number >= 1 or 'auto', got '${value}'`);
  return Number(value);
}

/** Refuses several workers without Redis: each would count limits, usage and keys on its own. */
export function assertWorkersShareState(workers: number, config: GatewayConfig): void {
  if (workers > 1 && !config.redis) {
    throw new ConfigError(
      `GATEWAY_WORKERS=${workers} needs Redis (REDIS_URL or redis in the config file): without it every worker would keep its own rate limits, usage and keys`,
    );
  }
}

/**
 * The cluster primary: forks `workers` gateway processes sharing the port, forks a replacement for
 * one that dies, passes SIGHUP (reload) on to every worker, and on SIGTERM/SIGINT passes the signal on
 * and exits once every worker has drained and exited (a second signal is passed on as well, so the
 * workers end their open requests at once). It gathers the workers' metrics for every scrape
 * ({@link ClusterMetrics}) and serves `METRICS_PORT` itself; rejects when it cannot listen there.
 */
export async function runPrimary(workers: number, config: GatewayConfig, logger: Logger): Promise<void> {
  const metrics = new ClusterMetrics();
  if (config.metricsPort !== undefined) {
    const server = await serveMetrics(metrics, config.metricsPort, config.host);
    const { url, wildcard } = boundUrlOf(server);
    const where = `${url}/metrics${wildcard ? ' (every interface)' : ''}`;
    logger.info({ metrics_url: url }, `metrics of every worker on ${where}`);
  }
  let stopping = false;
  const fork = () => {
    const worker = cluster.fork();
    worker.once('online', () => logger.info({ worker: worker.id, pid: worker.process.pid }, 'worker started'));
  };
  cluster.on('exit', (worker: Worker, code, signal) => {
    if (stopping) {
      if (Object.keys(cluster.workers ?? {}).length === 0) {
        logger.info('every worker has exited');
        process.exit(0);
      }
      return;
    }
    logger.error({ worker: worker.id, pid: worker.process.pid, code, signal }, 'worker died; starting a replacement');
    fork();
  });
  const each = (signal: NodeJS.Signals) => {
    for (const worker of Object.values(cluster.workers ?? {})) worker?.process.kill(signal);
  };
  const stop = (signal: NodeJS.Signals) => {
    if (!stopping) logger.info({ signal, drain_ms: config.drainMs }, 'shutting down: every worker drains');
    stopping = true;
    each(signal);
    if (Object.keys(cluster.workers ?? {}).length === 0) process.exit(0);
  };
  process.on('SIGTERM', () => stop('SIGTERM'));
  process.on('SIGINT', () => stop('SIGINT'));
  process.on('SIGHUP', () => each('SIGHUP'));
  logger.info({ workers }, `starting ${workers} workers`);
  for (let i = 0; i < workers; i += 1) fork();
}
