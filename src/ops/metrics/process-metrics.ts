import { collectDefaultMetrics, Gauge, type Registry } from 'prom-client';

/** What `gateway_build_info` says of the running gateway. */
export interface BuildInfo {
  /** The package version. */
  readonly version: string;
  /** The source revision the image was built from (`GATEWAY_REVISION`), `unknown` when not given. */
  readonly revision: string;
}

/**
 * Defines the metrics of the process itself: Node's defaults, what build it runs, and the usage records
 * it holds not yet stored (`usageQueueDepth`, read at each scrape).
 */
export function defineProcessMetrics(
  registry: Registry,
  sources: { readonly usageQueueDepth?: () => number; readonly build?: BuildInfo },
): void {
  const registers = [registry];
  collectDefaultMetrics({ register: registry });
  const build = new Gauge({
    name: 'gateway_build_info',
    help: 'Always 1: the gateway version, the source revision of its image and the Node.js version, as labels',
    labelNames: ['version', 'revision', 'nodejs_version'],
    registers,
    // The same process image everywhere: one series for the whole cluster, not one count per worker.
    aggregator: 'first',
  });
  const { version = 'unknown', revision = 'unknown' } = sources.build ?? {};
  build.labels(version, revision, process.versions.node).set(1);
  new Gauge({
    name: 'gateway_usage_queue_depth',
    help: 'Usage records taken but not yet stored',
    registers,
    aggregator: 'sum',
    collect() {
      this.set(sources.usageQueueDepth?.() ?? 0);
    },
  });
}
