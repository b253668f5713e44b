import cluster from 'node:cluster';
import type { Logger } from 'pino';
import { assertWorkersShareState, runPrimary, workerCount } from './server/cluster.ts';
import { ConfigError, loadConfig, type GatewayConfig } from './config/gateway-config.ts';
import { applyEnvFiles } from './config/env-files.ts';
import { startGateway, type Gateway } from './server/gateway.ts';
import { createLogger } from './core/logger.ts';
import { PluginLoadError } from './plugins/validate-plugin.ts';

/** Every problem on a line of its own (each names its field or variable, never a secret's value). */
function refusal(heading: string, error: ConfigError | PluginLoadError): string {
  const { problems } = error;
  return problems.length === 1
    ? `model-gateway: ${heading}: ${problems[0]}\n`
    : `model-gateway: ${heading}:\n${problems.map((problem) => `  ${problem}\n`).join('')}`;
}

/** The configuration, the env files applied first; a refused one ends the process, naming each problem. */
function configOrExit(): GatewayConfig {
  try {
    applyEnvFiles(process.env);
    return loadConfig();
  } catch (error) {
    if (error instanceof ConfigError) {
      process.stderr.write(refusal('invalid configuration', error));
      process.exit(1);
    }
    throw error;
  }
}

/** The worker processes to run (GATEWAY_WORKERS); ends the process when they could not share the config's state. */
function workersOrExit(config: GatewayConfig): number {
  try {
    const workers = workerCount(process.env.GATEWAY_WORKERS);
    assertWorkersShareState(workers, config);
    return workers;
  } catch (error) {
    if (!(error instanceof ConfigError)) throw error;
    process.stderr.write(`model-gateway: cannot start: ${error.message}\n`);
    process.exit(1);
  }
}

/** The gateway, started; a refused plugin or configuration ends the process, naming each problem. */
async function startOrExit(config: GatewayConfig, logger: Logger): Promise<Gateway> {
  try {
    return await startGateway(config, process.env, logger, { clusterWorker: cluster.isWorker });
  } catch (error) {
    if (error instanceof PluginLoadError || error instanceof ConfigError) {
      process.stderr.write(refusal('cannot start', error));
      process.exit(1);
    }
    throw error;
  }
}

/** Closes the gateway, then exits: 0 once every usage record is stored, 1 when closing fails or never ends. */
function shutDown(gateway: Gateway, drainMs: number, logger: Logger): void {
  // Last resort only: the drain ends open requests itself; this guards against a store that never answers.
  const force = setTimeout(() => {
    logger.error('shutdown did not finish in time; exiting');
    process.exit(1);
  }, drainMs + 60_000);
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
}

/** SIGTERM and SIGINT shut the gateway down (a second one ends the requests still open); SIGHUP reloads its config. */
function handleSignals(gateway: Gateway, drainMs: number, logger: Logger): void {
  let stopping = false;
  const stop = (signal: string) => {
    if (stopping) {
      logger.warn({ signal }, 'second signal: ending the requests still open now');
      gateway.endInFlight();
      return;
    }
    stopping = true;
    logger.info({ signal, drain_ms: drainMs }, 'shutting down: no new connections, finishing requests in flight');
    shutDown(gateway, drainMs, logger);
  };
  process.on('SIGTERM', () => stop('SIGTERM'));
  process.on('SIGINT', () => stop('SIGINT'));
  // Reads the config file again (the outcome is logged; a refused file leaves the running configuration).
  process.on('SIGHUP', () => void gateway.reloadConfig('SIGHUP'));
}

async function main(): Promise<void> {
  const config = configOrExit();
  const workers = workersOrExit(config);
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
  const gateway = await startOrExit(config, logger);
  // The host in force, as bound: HOST=0.0.0.0 is said as such, not as the loopback address that reaches it.
  const { url, wildcard } = gateway.listening;
  logger.info({ url }, `model gateway listening on ${url}${wildcard ? ' (every interface)' : ''}`);
  handleSignals(gateway, config.drainMs, logger);
}

await main();
