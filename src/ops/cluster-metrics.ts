import cluster, { type Worker } from 'node:cluster';
import { AggregatorRegistry, type Registry } from 'prom-client';
import { serviceUnavailable } from '../core/gateway-errors.ts';

/** Anything that answers a Prometheus scrape: one process's metrics, or the whole cluster's. */
export interface MetricsSource {
  scrape(): Promise<{ contentType: string; body: string }>;
}

/** How long the primary waits for every worker's figures, and a worker for the primary's answer. */
const WORKER_ANSWER_MS = 3000;
const PRIMARY_ANSWER_MS = WORKER_ANSWER_MS + 1000;

// The IPC messages, prefixed so they cannot be mistaken for prom-client's or Node's own.
const FIGURES_REQUEST = 'gateway:metrics-figures-request';
const FIGURES = 'gateway:metrics-figures';
const SCRAPE_REQUEST = 'gateway:metrics-scrape-request';
const SCRAPE = 'gateway:metrics-scrape';

type WorkerFigures = Awaited<ReturnType<Registry['getMetricsAsJSON']>>;

interface FiguresRequest {
  readonly type: typeof FIGURES_REQUEST;
  readonly id: number;
}
interface FiguresAnswer {
  readonly type: typeof FIGURES;
  readonly id: number;
  readonly figures?: WorkerFigures;
  readonly error?: string;
}
interface ScrapeRequest {
  readonly type: typeof SCRAPE_REQUEST;
  readonly id: number;
}
interface ScrapeAnswer {
  readonly type: typeof SCRAPE;
  readonly id: number;
  readonly contentType?: string;
  readonly body?: string;
  readonly error?: string;
}

const unavailable = (reason: string) =>
  serviceUnavailable(`The gateway's metrics could not be gathered from every worker (${reason}); retry the scrape`);

const isMessage = <T extends { type: string }>(message: unknown, type: T['type']): message is T =>
  typeof message === 'object' && message !== null && (message as { type?: unknown }).type === type;

/**
 * The cluster primary's view of the metrics: each scrape asks every worker that listens for its
 * registry (as JSON, over the cluster IPC channel) and sums them with prom-client's
 * {@link AggregatorRegistry} (each metric by its own `aggregator`: counters and histograms sum).
 * A worker still starting (not listening yet) is not asked; a worker that does not answer within
 * 3 s fails the scrape rather than give a partial sum, which Prometheus would read as counter resets.
 * Workers also reach it through {@link PrimaryScrape}, so a scrape on the shared main port answers
 * for the whole gateway too.
 */
export class ClusterMetrics implements MetricsSource {
  private readonly listening = new Set<Worker>();
  private readonly pending = new Map<
    number,
    { readonly answer: (figures: WorkerFigures) => void; readonly fail: (error: Error) => void }
  >();
  private nextId = 0;

  constructor() {
    cluster.on('listening', (worker) => this.listening.add(worker));
    cluster.on('exit', (worker) => this.listening.delete(worker));
    cluster.on('message', (worker, message: unknown) => {
      if (isMessage<FiguresAnswer>(message, FIGURES)) {
        const waiting = this.pending.get(message.id);
        if (message.figures) waiting?.answer(message.figures);
        else waiting?.fail(new Error(`worker ${worker.id}: ${message.error ?? 'no figures'}`));
      } else if (isMessage<ScrapeRequest>(message, SCRAPE_REQUEST)) {
        this.scrape().then(
          ({ contentType, body }) =>
            sendTo(worker, { type: SCRAPE, id: message.id, contentType, body } satisfies ScrapeAnswer),
          (error: Error) =>
            sendTo(worker, { type: SCRAPE, id: message.id, error: error.message } satisfies ScrapeAnswer),
        );
      }
    });
  }

  async scrape(): Promise<{ contentType: string; body: string }> {
    const workers = [...this.listening].filter((worker) => worker.isConnected());
    const figures = await Promise.all(workers.map((worker) => this.figuresOf(worker))).catch((error: Error) => {
      throw unavailable(error.message);
    });
    const registry = AggregatorRegistry.aggregate(figures);
    return { contentType: registry.contentType, body: await registry.metrics() };
  }

  private figuresOf(worker: Worker): Promise<WorkerFigures> {
    const id = this.nextId++;
    return new Promise<WorkerFigures>((resolve, reject) => {
      const timer = setTimeout(
        () =>
          settle(() => reject(new Error(`worker ${worker.id} did not send its metrics within ${WORKER_ANSWER_MS} ms`))),
        WORKER_ANSWER_MS,
      );
      const settle = (then: () => void) => {
        clearTimeout(timer);
        this.pending.delete(id);
        then();
      };
      this.pending.set(id, {
        answer: (figures) => settle(() => resolve(figures)),
        fail: (error) => settle(() => reject(error)),
      });
      sendTo(worker, { type: FIGURES_REQUEST, id } satisfies FiguresRequest);
    });
  }
}

// With a callback, a closed channel is reported to it rather than emitted as an 'error' event.
const ignoreClosed = () => {};

/** Sends to a worker; when it is gone, the pending request times out. */
function sendTo(worker: Worker, message: object): void {
  worker.send(message, undefined, undefined, ignoreClosed);
}

/** Sends to the primary; false when there is none to send to (the callback hears of a closed channel). */
function sendToPrimary(message: object, onClosed: () => void = ignoreClosed): boolean {
  if (!process.send) return false;
  process.send(message, undefined, undefined, (error: Error | null) => {
    if (error) onClosed();
  });
  return true;
}

/** In a worker: answers the primary's requests for this worker's figures from `registry`. */
export function answerFiguresRequests(registry: Registry): void {
  process.on('message', (message: unknown) => {
    if (!isMessage<FiguresRequest>(message, FIGURES_REQUEST)) return;
    registry.getMetricsAsJSON().then(
      (figures) => sendToPrimary({ type: FIGURES, id: message.id, figures } satisfies FiguresAnswer),
      (error: Error) => sendToPrimary({ type: FIGURES, id: message.id, error: error.message } satisfies FiguresAnswer),
    );
  });
}

/**
 * In a worker: a scrape of the whole gateway, asked of the primary ({@link ClusterMetrics}), so
 * whichever worker takes the scrape on the shared port answers with every worker's figures.
 * Fails with a 503 (`GW_ERR_UNAVAILABLE`) when the primary cannot give them.
 */
export class PrimaryScrape implements MetricsSource {
  private readonly pending = new Map<number, (answer: ScrapeAnswer) => void>();
  private nextId = 0;

  constructor() {
    process.on('message', (message: unknown) => {
      if (isMessage<ScrapeAnswer>(message, SCRAPE)) this.pending.get(message.id)?.(message);
    });
  }

  scrape(): Promise<{ contentType: string; body: string }> {
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      const done = () => {
        clearTimeout(timer);
        this.pending.delete(id);
      };
      const fail = (reason: string) => {
        done();
        reject(unavailable(reason));
      };
      const timer = setTimeout(
        () => fail(`the cluster primary did not answer within ${PRIMARY_ANSWER_MS} ms`),
        PRIMARY_ANSWER_MS,
      );
      this.pending.set(id, (answer) => {
        done();
        if (answer.body !== undefined && answer.contentType !== undefined)
          resolve({ contentType: answer.contentType, body: answer.body });
        // The primary's refusal is already worded for the client.
        else
          reject(serviceUnavailable(answer.error ?? "The gateway's metrics could not be gathered; retry the scrape"));
      });
      const unreachable = () => fail('the cluster primary cannot be reached');
      if (!sendToPrimary({ type: SCRAPE_REQUEST, id } satisfies ScrapeRequest, unreachable)) unreachable();
    });
  }
}
