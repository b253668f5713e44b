import cluster from 'node:cluster';
import { assertWorkersShareState, runPrimary, workerCount } from './server/cluster.ts';
import { ConfigError, loadConfig } from './config/gateway-config.ts';
import { applyEnvFiles } from './config/env-files.ts';
import { startGateway } from './server/gateway.ts';
import { createLogger } from './core/logger.ts';
import { PluginLoadError } from './plugins/validate-plugin.ts';

/** Every problem on a line of its own (each names its field or variable, never a secret's value). */
function refusal(heading: string, error: ConfigError | PluginLoadError): string {
  const { problems } = error;
  return problems.length === 1
    ? `model-gateway: ${heading}: ${problems[0]}\n`
    : `model-gateway: ${heading}:\n${problems.map((problem) => `  ${problem}\n`).join('')}`;
}

async function main(): Promise<void> {
  let config;
  try {
    applyEnvFiles(process.env);
    config = loadConfig();
  } catch (error) {
    if (error instanceof ConfigError) {
      process.stderr.write(refusal('invalid configuration', error));
      process.exit(1);
    }
    throw error;
  }
  let workers: number;
  try {
    workers = workerCount(process.env.GATEWAY_WORKERS);
    assertWorkersShareState(workers, config);
  } catch (error) {
    if (!(error instanceof ConfigError)) throw error;
    process.stderr.write(`model-gateway: cannot start: ${error.message}\n`);
    process.exit(1);
  }
  if (workers > 1 && cluster.isPrimary) {
    try {
      await runPrimary(workers, config, createLogger(config.logLevel).child({ role: 'primary' }));
    } catch (error) {
      process.stderr.write(`model-gateway: cannot start: ${(error as Error).message}\n`);
      process.exit(1);
    }
    return;
  }
  const logger = cluster.isWorker
    ? createLogger(config.logLevel).child({ worker: cluster.worker!.id })
    : createLogger(config.logLevel);
  let gateway;
  try {
    gateway = await startGateway(config, process.env, logger, { clusterWorker: cluster.isWorker });
  } catch (error) {
    if (error instanceof PluginLoadError || error instanceof ConfigError) {
      process.stderr.write(refusal('cannot start', error));
      process.exit(1);
    }
    throw error;
  }
  // The host in force, as bound: HOST=0.0.0.0 is said as such, not as the loopback address that reaches it.
  const { url, wildcard } = gateway.listening;
  logger.info({ url }, `model gateway listening on ${url}${wildcard ? ' (every interface)' : ''}`);
  let stopping = false;
  const stop = (signal: string) => {
    if (stopping) {
      logger.warn({ signal }, 'second signal: ending the requests still open now');
      gateway.endInFlight();
      return;
    }
    stopping = true;
    logger.info(
      { signal, drain_ms: config.drainMs },
      'shutting down: no new connections, finishing requests in flight',
    );
    // Last resort only: the drain ends open requests itself; this guards against a store that never answers.
    const force = setTimeout(() => {
      logger.error('shutdown did not finish in time; exiting');
      process.exit(1);
    }, config.drainMs + 60_000);
    force.unref();
    gateway.close().then(
      () => {
        logger.info('shut down: every usage record stored');
        process.exit(0);
      },
      (error: unknown) => {
        logger.error({ err: error }, 'shutdown failed');
        process.exit(1);
      },
    );
  };
  process.on('SIGTERM', () => stop('SIGTERM'));
  process.on('SIGINT', () => stop('SIGINT'));
  // Reads the config file again (the outcome is logged; a refused file leaves the running configuration).
  process.on('SIGHUP', () => void gateway.reloadConfig('SIGHUP'));
}

await main();
