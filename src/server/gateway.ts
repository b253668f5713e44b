import type { Server } from 'node:http';
import type { Logger } from 'pino';
import type { GatewayConfig } from '../config/gateway-config.ts';
import { boundUrlOf, urlOf } from '../control-plane/metrics-route.ts';
import type { EventSource } from '../core/diagnostics.ts';
import type { GatewayMetrics } from '../ops/metrics.ts';
import type { KeyStore } from '../stores/keys/key-store.ts';
import { openStores } from '../stores/open-stores.ts';
import type { LimitLedger } from '../usage/limit-ledger.ts';
import type { UsageStore } from '../usage/usage-accounting.ts';
import type { ReloadResult } from './live-config.ts';
import { startConfiguration } from './parts/configuration.ts';
import { startLimits } from './parts/limits.ts';
import type { ControlPlaneParts } from './parts/control-plane.ts';
import { listen, type Listener } from './parts/listener.ts';
import { startModelServing } from './parts/model-serving.ts';
import { startObservability } from './parts/observability.ts';
import { readiness } from './parts/readiness.ts';
import { shutdown, type Shutdown } from './parts/shutdown.ts';
import { openWayIn } from './parts/way-in.ts';
import { startWebSockets } from './parts/websockets.ts';
import type { ResponsesWebSockets } from '../data-plane/websocket/responses-websockets.ts';

export interface Gateway {
  /** `http://host:port` the gateway is reached at from this machine (loopback when it listens on every interface). */
  readonly url: string;
  /** Where it listens, as bound (`http://0.0.0.0:8080`), and whether that is every interface. */
  readonly listening: { readonly url: string; readonly wildcard: boolean };
  readonly server: Server;
  /**
   * `http://host:port` of the separate metrics listener (`METRICS_PORT`); undefined when `/metrics` is on the main port
   * or the cluster primary serves it.
   */
  readonly metricsUrl?: string;
  readonly metrics: GatewayMetrics;
  /**
   * Whose events (`EVENTS` of `core/diagnostics.ts`) this gateway's are: subscribe with it to observe its requests
   * only.
   */
  readonly source: EventSource;
  readonly keys: KeyStore;
  readonly usage: UsageStore;
  /** The counters of token and money limits (reservations included). */
  readonly limits: LimitLedger;
  /** Waits until every usage record taken so far is stored. */
  flushUsage(): Promise<void>;
  /**
   * Waits until every settlement so far is evaluated for limit alerts (their events published) and every
   * webhook delivery started has ended (delivered, or its last attempt failed).
   */
  flushAlerts(): Promise<void>;
  /**
   * Stops accepting connections and lets requests and streams in flight finish for up to `drainMs`
   * (the config's by default); then ends those still open (each still gets its usage record, estimated
   * where the upstream had not reported it yet), stores every pending record and closes the stores.
   */
  close(drainMs?: number): Promise<void>;
  /** Reads the config file again and applies it when valid (see {@link LiveConfig}); SIGHUP calls it. */
  reloadConfig(trigger?: string): ReloadResult;
  /** The short hash of the config file in force. */
  configVersion(): string;
  /** During {@link close}: ends the requests still open now instead of at the end of the drain time. */
  endInFlight(): void;
}

/** How the gateway process runs: alone, or as one worker of a cluster (`GATEWAY_WORKERS`). */
export interface StartOptions {
  /**
   * A cluster worker: `/metrics` on the main port answers with the whole cluster's figures, gathered
   * by the primary (which also serves `METRICS_PORT` itself, so the worker does not listen there).
   */
  readonly clusterWorker?: boolean;
}

/**
 * Builds every part from the config, each from the parts before it (configuration, stores,
 * observability, limits, model serving, control plane, listener, shutdown), starts listening, and gives
 * back a handle that closes it all.
 */
export async function startGateway(
  config: GatewayConfig,
  env: NodeJS.ProcessEnv,
  logger: Logger,
  options: StartOptions = {},
): Promise<Gateway> {
  const configuration = await startConfiguration(config, env, logger);
  const stores = await openStores(config, { unreachableRedis: 'degrade', usage: true, limits: 'serve', logger });
  const observability = await startObservability(config, env, logger, configuration, stores);
  const limits = startLimits(config, logger, configuration, stores);
  const serving = startModelServing(config, logger, configuration, stores, observability, limits);
  const ready = readiness(stores, configuration);
  const parts = {
    configuration,
    stores,
    observability,
    limits,
    serving,
    readiness: ready,
    clusterWorker: options.clusterWorker,
  };
  const wayIn = await openWayIn(config, logger, parts);
  const webSockets = startWebSockets(config, logger, observability, limits, serving);
  const { metrics } = observability;
  const listener = await listen(config, logger, metrics, wayIn, options.clusterWorker, webSockets.upgrade);
  configuration.live.watch();
  const stop = gatewayShutdown(logger, listener, parts, webSockets);
  return {
    url: urlOf(listener.server),
    listening: boundUrlOf(listener.server),
    source: observability.source,
    metricsUrl: listener.metricsServer && urlOf(listener.metricsServer),
    metrics: observability.metrics,
    server: listener.server,
    keys: stores.keys,
    usage: stores.usage,
    limits: stores.ledger,
    // Settlements ride along with the records: flushed after them.
    flushUsage: () => serving.accounting.flush().then(() => stores.ledger.flush()),
    flushAlerts: () => observability.flushAlerts(),
    endInFlight: stop.endInFlight,
    reloadConfig: (trigger = 'SIGHUP') => configuration.live.reload(trigger),
    configVersion: () => configuration.live.current.version,
    close: (drainMs = config.drainMs) => stop.close(drainMs),
  };
}

/**
 * The gateway's stop: no more connections, config changes or readiness, the WebSockets drained (then cut), and once
 * every request ended, usage flushed first and the stores closed last.
 */
function gatewayShutdown(
  logger: Logger,
  listener: Listener,
  parts: ControlPlaneParts,
  webSockets: ResponsesWebSockets,
): Shutdown {
  const { configuration, serving, observability, stores } = parts;
  return shutdown(logger, {
    listener,
    inFlight: serving.inFlight,
    stopAccepting: () => (parts.readiness.draining(), configuration.live.close(), webSockets.drain()),
    cut: () => webSockets.terminate(),
    closeInOrder: [
      () => serving.accounting.flush(),
      () => serving.close(),
      () => observability.close(),
      () => stores.close(),
    ],
  });
}
