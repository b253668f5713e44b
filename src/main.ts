import { ConfigError, loadConfig } from './config/gateway-config.ts';
import { startGateway } from './gateway.ts';
import { createLogger } from './logger.ts';
import { PluginLoadError } from './plugins/validate-plugin.ts';

async function main(): Promise<void> {
  let config;
  try {
    config = loadConfig();
  } catch (error) {
    if (error instanceof ConfigError) {
      process.stderr.write(`model-gateway: invalid configuration: ${error.message}\n`);
      process.exit(1);
    }
    throw error;
  }
  const logger = createLogger(config.logLevel);
  let gateway;
  try {
    gateway = await startGateway(config, process.env, logger);
  } catch (error) {
    if (error instanceof PluginLoadError || error instanceof ConfigError) {
      process.stderr.write(`model-gateway: cannot start: ${error.message}\n`);
      process.exit(1);
    }
    throw error;
  }
  logger.info({ url: gateway.url }, `model gateway listening on ${gateway.url}`);
  let stopping = false;
  const stop = (signal: string) => {
    if (stopping) return;
    stopping = true;
    logger.info({ signal }, 'shutting down: finishing requests in flight');
    const force = setTimeout(() => process.exit(1), 30_000);
    force.unref();
    gateway.close().then(
      () => process.exit(0),
      (error: unknown) => {
        logger.error({ err: error }, 'shutdown failed');
        process.exit(1);
      },
    );
  };
  process.on('SIGTERM', () => stop('SIGTERM'));
  process.on('SIGINT', () => stop('SIGINT'));
}

await main();
