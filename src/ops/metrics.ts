import { Registry, type Counter, type Histogram, type LabelValues } from 'prom-client';
import type { LimitRefusal } from '../core/gateway-errors.ts';
import type { Meter } from '../core/limits.ts';
import type { GenAiMetrics, GenAiObservation } from './genai-observation.ts';
import { defineCacheMetrics, type CacheMetrics } from './metrics/cache-metrics.ts';
import { defineConfigMetrics, type ConfigMetrics } from './metrics/config-metrics.ts';
import { defineConnectionRefusals, type RefusalReason } from './metrics/connection-metrics.ts';
import { defineExtensionMetrics, type ExtensionMetrics } from './metrics/extension-metrics.ts';
import { defineGenAiMetrics, type GenAiHistograms } from './metrics/genai-metrics.ts';
import { defineLimitMetrics, recordLimitUse, type LimitMetrics, type LimitUses } from './metrics/limit-metrics.ts';
import { defineProcessMetrics, type BuildInfo } from './metrics/process-metrics.ts';
import { defineRequestMetrics, type RequestMetrics } from './metrics/request-metrics.ts';
import { defineStreamMetrics, type StreamMetrics } from './metrics/stream-metrics.ts';
import { defineTokenMetrics, type TokenMetrics } from './metrics/token-metrics.ts';
import { defineTraceMetrics, type TraceMetrics } from './metrics/trace-metrics.ts';
import {
  defineUpstreamMetrics,
  type EndpointHealth,
  type UpstreamAttemptMetrics,
  type UpstreamOutcome,
} from './metrics/upstream-metrics.ts';

export type { BuildInfo, EndpointHealth, RefusalReason, UpstreamOutcome };

/**
 * What the upstream side reports into (the endpoint pools plug in here): every attempt, and a way to
 * read each endpoint's state when Prometheus scrapes.
 */
export interface UpstreamMetrics {
  upstreamAttempt(provider: string, endpoint: string, outcome: UpstreamOutcome): void;
  /** Replaces the source `gateway_endpoint_up` reads at scrape time (default: the last attempt's outcome). */
  setEndpointStates(read: () => Iterable<EndpointHealth>): void;
}

/** The label value of requests that never reached a model (rejected before one was resolved). */
export const NO_MODEL = 'none';

/** The label set of the GenAI histograms' children of one operation. */
function genAiLabels(observation: GenAiObservation) {
  return {
    gen_ai_operation_name: observation.operation,
    gen_ai_provider_name: observation.provider,
    gen_ai_request_model: observation.requestModel,
  };
}

/** The GenAI histograms' children of one operation, provider and requested model. */
interface GenAiChildren {
  readonly inputTokens: BoundHistogram;
  readonly outputTokens: BoundHistogram;
  readonly duration: BoundHistogram;
  readonly firstChunk: BoundHistogram;
  readonly perChunk: BoundHistogram;
}

interface RouteChildren {
  readonly duration: BoundHistogram;
  readonly overhead: BoundHistogram;
  readonly firstByte: BoundHistogram;
  /** model → status → counter */
  readonly requests: Map<string, Map<number, BoundCounter>>;
}

/**
 * The gateway's Prometheus metrics on a registry of its own (one per gateway, so tests can run several).
 * Label values are bounded: routes are the gateway's own route names, models the registry's canonical
 * ids, statuses HTTP statuses; no key material. Labelled children are created once and kept, so a
 * request costs a few map lookups and increments.
 */
export class GatewayMetrics implements UpstreamMetrics, GenAiMetrics {
  readonly registry = new Registry();
  private readonly requests: RequestMetrics;
  private readonly tokens: TokenMetrics;
  private readonly upstream: UpstreamAttemptMetrics;
  private readonly limits: LimitMetrics;
  private readonly config: ConfigMetrics;
  private readonly extensions: ExtensionMetrics;
  private readonly cache: CacheMetrics;
  private readonly genAiHistograms: GenAiHistograms;
  private readonly traces: TraceMetrics;
  private readonly connectionRefusals: Counter<'reason'>;
  private readonly streams: StreamMetrics;
  private readonly genAiChildren = new Map<string, GenAiChildren>();
  private readonly routes = new Map<string, RouteChildren>();
  private readonly tokenChildren = new Map<string, readonly [BoundCounter, BoundCounter, BoundCounter]>();
  /** provider → endpoint name → counter */
  private readonly cachedInputChildren = new Map<string, Map<string, BoundCounter>>();
  private readonly lastOutcome = new Map<string, EndpointHealth>();
  private readonly attemptChildren = new Map<string, BoundCounter>();
  private readonly cacheResultChildren = new Map<string, BoundCounter>();
  private endpointStates: () => Iterable<EndpointHealth> = () => this.lastOutcome.values();
  private openStreams = 0;
  private openWebSockets = 0;
  private readonly limitUses: LimitUses = new Map();

  constructor(sources: { usageQueueDepth?: () => number; configStale?: () => boolean; build?: BuildInfo } = {}) {
    const registers = [this.registry];
    defineProcessMetrics(this.registry, sources);
    this.requests = defineRequestMetrics(registers);
    this.tokens = defineTokenMetrics(registers);
    this.upstream = defineUpstreamMetrics(registers, () => this.endpointStates());
    this.limits = defineLimitMetrics(registers, this.limitUses);
    this.config = defineConfigMetrics(registers, sources.configStale);
    this.extensions = defineExtensionMetrics(registers);
    this.cache = defineCacheMetrics(registers);
    this.genAiHistograms = defineGenAiMetrics(registers);
    this.traces = defineTraceMetrics(registers);
    this.connectionRefusals = defineConnectionRefusals(registers);
    this.streams = defineStreamMetrics(registers, {
      streams: () => this.openStreams,
      webSockets: () => this.openWebSockets,
    });
  }

  /** A day's or month's budget or quota as a settlement left it (`used` in the meter's unit, as its `limit`). */
  limitUse(meter: Pick<Meter, 'scope' | 'period' | 'kind' | 'counter' | 'limit' | 'resetAt'>, used: number): void {
    recordLimitUse(this.limitUses, meter, used);
  }

  webSocketOpened(): void {
    this.openWebSockets += 1;
  }

  /** A close code as a label: the protocol's (1000-1015) as they are, an application's (3000-4999) as `application`. */
  webSocketClosed(code: number): void {
    this.openWebSockets -= 1;
    const label = code >= 1000 && code <= 1015 ? String(code) : code >= 3000 && code <= 4999 ? 'application' : 'other';
    this.streams.webSocketCloses.labels(label).inc();
  }

  /** A message a client sent, answered with `sent` messages. */
  webSocketMessage(type: string, sent: number): void {
    this.streams.webSocketReceived.labels(type).inc();
    this.streams.webSocketSent.inc(sent);
  }

  /** Precreates the children of the routes (call with every route name at start). */
  route(route: string): RouteChildren {
    let children = this.routes.get(route);
    if (children === undefined) {
      children = {
        duration: boundHistogram(this.requests.duration, { route }),
        overhead: boundHistogram(this.requests.overhead, { route }),
        firstByte: boundHistogram(this.requests.firstByte, { route }),
        requests: new Map(),
      };
      this.routes.set(route, children);
    }
    return children;
  }

  /**
   * One answered request. Times in ms; `upstreamMs` is the time spent waiting on the upstream, `firstByteMs` undefined
   * when unknown.
   */
  request(
    route: string,
    model: string,
    status: number,
    durationMs: number,
    upstreamMs: number,
    firstByteMs: number | undefined,
  ): void {
    const children = this.route(route);
    let byStatus = children.requests.get(model);
    if (byStatus === undefined) children.requests.set(model, (byStatus = new Map()));
    let counter = byStatus.get(status);
    if (counter === undefined) {
      counter = boundCounter(this.requests.answered, { route, model, status: String(status) });
      byStatus.set(status, counter);
    }
    counter.inc();
    children.duration.observe(durationMs / 1000);
    children.overhead.observe(Math.max(0, durationMs - upstreamMs) / 1000);
    if (firstByteMs !== undefined) children.firstByte.observe(firstByteMs / 1000);
  }

  /** One upstream operation's GenAI metrics. */
  genAi(observation: GenAiObservation): void {
    const key = `${observation.operation}\u0000${observation.provider}\u0000${observation.requestModel}`;
    let children = this.genAiChildren.get(key);
    if (children === undefined) {
      const labels = genAiLabels(observation);
      const { tokens, duration, firstChunk, perChunk } = this.genAiHistograms;
      children = {
        inputTokens: boundHistogram(tokens, { ...labels, gen_ai_token_type: 'input' }),
        outputTokens: boundHistogram(tokens, { ...labels, gen_ai_token_type: 'output' }),
        duration: boundHistogram(duration, labels),
        firstChunk: boundHistogram(firstChunk, labels),
        perChunk: boundHistogram(perChunk, labels),
      };
      this.genAiChildren.set(key, children);
    }
    if (observation.inputTokens !== undefined) children.inputTokens.observe(observation.inputTokens);
    if (observation.outputTokens !== undefined) children.outputTokens.observe(observation.outputTokens);
    children.duration.observe(observation.durationS);
    if (observation.timeToFirstChunkS !== undefined) children.firstChunk.observe(observation.timeToFirstChunkS);
    if (observation.timePerOutputChunkS !== undefined) children.perChunk.observe(observation.timePerOutputChunkS);
  }

  /** Spans the exporter delivered. */
  tracesExported(count: number): void {
    this.traces.spansExported.inc(count);
  }

  /** Spans lost: the export queue was full, or an export failed. */
  tracesDropped(reason: 'queue_full' | 'export_failed', count: number): void {
    this.traces.spansDropped.labels(reason).inc(count);
  }

  /** A request the response cache was asked about. */
  cacheResult(result: 'hit' | 'miss' | 'bypass'): void {
    let child = this.cacheResultChildren.get(result);
    if (child === undefined)
      this.cacheResultChildren.set(result, (child = boundCounter(this.cache.results, { result })));
    child.inc();
  }

  cacheStored(bytes: number): void {
    this.cache.storedBytes.inc(bytes);
  }

  cacheEvicted(bytes: number): void {
    this.cache.evictedBytes.inc(bytes);
  }

  /** An answer served from the cache, and what it would have cost. */
  cacheSaved(usd: number): void {
    if (usd > 0) this.cache.savedUsd.inc(usd);
  }

  /** A plugin hook threw or returned a wrong shape. */
  pluginError(plugin: string, hook: string): void {
    this.extensions.pluginErrors.labels(plugin, hook).inc();
  }

  /** A guardrail blocked or redacted a request's or an answer's text, or (`fail_open`) let it pass unchecked. */
  guardrailAction(guardrail: string, phase: 'request' | 'response', action: 'block' | 'redact' | 'fail_open'): void {
    this.extensions.guardrailActions.labels(guardrail, phase, action).inc();
  }

  tokensUsed(model: string, input: number, output: number, cached: number): void {
    let children = this.tokenChildren.get(model);
    if (children === undefined) {
      children = [
        boundCounter(this.tokens.byModel, { model, type: 'input' }),
        boundCounter(this.tokens.byModel, { model, type: 'output' }),
        boundCounter(this.tokens.byModel, { model, type: 'cached' }),
      ];
      this.tokenChildren.set(model, children);
    }
    if (input > 0) children[0].inc(input);
    if (output > 0) children[1].inc(output);
    if (cached > 0) children[2].inc(cached);
  }

  /**
   * Cached input tokens an endpoint reported for one answer. Counted for every answer with usage, 0
   * included, so each endpoint that served has a series to compare with `gateway_tokens_total`.
   */
  cachedInputTokens(provider: string, endpoint: string, cached: number): void {
    let byEndpoint = this.cachedInputChildren.get(provider);
    if (byEndpoint === undefined) this.cachedInputChildren.set(provider, (byEndpoint = new Map()));
    let counter = byEndpoint.get(endpoint);
    if (counter === undefined)
      byEndpoint.set(endpoint, (counter = boundCounter(this.tokens.cachedInput, { provider, endpoint })));
    counter.inc(cached > 0 ? cached : 0);
  }

  /** A request refused by a key's, team's or address's limit (`rpm`, `tpm`, `quota`, `budget`, `concurrency`). */
  limitRefused({ kind, scope }: LimitRefusal): void {
    this.limits.refusals.labels(kind, scope).inc();
  }

  /** A 429: `rate_limit` (request limits, failed-auth throttle) or `quota` (token quotas). */
  limited(reason: 'rate_limit' | 'quota'): void {
    this.limits.rateLimited.labels(reason).inc();
  }

  refused(reason: RefusalReason): void {
    this.connectionRefusals.labels(reason).inc();
  }

  configReload(result: 'applied' | 'rejected'): void {
    this.config.reloads.labels(result).inc();
  }

  streamOpened(): void {
    this.openStreams += 1;
  }

  streamClosed(): void {
    this.openStreams -= 1;
  }

  upstreamAttempt(provider: string, endpoint: string, outcome: UpstreamOutcome): void {
    const key = `${provider}\u0000${endpoint}`;
    // The child per label set, found by one Map lookup rather than prom-client's label hashing per attempt.
    const childKey = `${key}\u0000${outcome}`;
    let child = this.attemptChildren.get(childKey);
    if (child === undefined)
      this.attemptChildren.set(
        childKey,
        (child = boundCounter(this.upstream.attempts, { provider, endpoint, outcome })),
      );
    child.inc();
    const up = outcome !== 'transport_error' && outcome !== 'timeout';
    if (this.lastOutcome.get(key)?.up !== up) this.lastOutcome.set(key, { provider, endpoint, up });
  }

  setEndpointStates(read: () => Iterable<EndpointHealth>): void {
    this.endpointStates = read;
  }

  /** The exposition text and its content type. */
  async scrape(): Promise<{ contentType: string; body: string }> {
    return { contentType: this.registry.contentType, body: await this.registry.metrics() };
  }
}

// ---------------------------------------------------------------------------------------------------
// Children bound to their series.

/**
 * Children of prom-client metrics that are bound to their series for good. prom-client's own `labels(...)` children
 * hash their label set, validate it and build an object on every update (about a microsecond each, and a request makes
 * a dozen). These make their first update through prom-client itself, which creates or finds the series, then keep a
 * reference to that series and update it in place as prom-client's update does. A new series map (`reset()`) sends
 * the next update through prom-client again. They rely on prom-client 15's series layout, which
 * `test/ops/metric-children.test.ts` checks by comparing their output with prom-client's own children.
 */
export interface BoundCounter {
  inc(value?: number): void;
}

export interface BoundHistogram {
  observe(value: number): void;
}

interface CounterSeries {
  value: number;
  readonly labels: LabelValues<string>;
}

interface HistogramSeries {
  sum: number;
  count: number;
  readonly bucketValues: Record<string, number>;
  readonly labels: LabelValues<string>;
}

/** The part of a prom-client metric these children use: its series by label hash, replaced on reset. */
interface SeriesOf<S> {
  readonly hashMap: Record<string, S>;
}

/** The series whose labels are `labels`, in a metric's series map. */
function seriesIn<S extends { readonly labels: LabelValues<string> }>(
  map: Record<string, S>,
  labels: LabelValues<string>,
): S | undefined {
  const names = Object.keys(labels);
  for (const series of Object.values(map)) {
    const own = series.labels;
    if (Object.keys(own).length !== names.length) continue;
    if (names.every((name) => String(own[name]) === String(labels[name]))) return series;
  }
  return undefined;
}

export function boundCounter<T extends string>(counter: Counter<T>, labels: LabelValues<T>): BoundCounter {
  const metric = counter as unknown as SeriesOf<CounterSeries>;
  let map: Record<string, CounterSeries> | undefined;
  let series: CounterSeries | undefined;
  return {
    inc(value = 1) {
      if (series !== undefined && map === metric.hashMap && value >= 0 && Number.isFinite(value)) {
        series.value += value;
        return;
      }
      // The first update, one after a reset, or a value prom-client refuses (it throws as it always did).
      counter.inc(labels, value);
      map = metric.hashMap;
      series = seriesIn(map, labels);
    },
  };
}

export function boundHistogram<T extends string>(histogram: Histogram<T>, labels: LabelValues<T>): BoundHistogram {
  const metric = histogram as unknown as SeriesOf<HistogramSeries> & { readonly upperBounds: readonly number[] };
  // The bucket of each bound as prom-client keys it (the bound as a property name).
  const bounds = metric.upperBounds;
  const keys = bounds.map(String);
  let map: Record<string, HistogramSeries> | undefined;
  let series: HistogramSeries | undefined;
  return {
    observe(value) {
      if (series !== undefined && map === metric.hashMap && Number.isFinite(value)) {
        series.sum += value;
        series.count += 1;
        for (let index = 0; index < bounds.length; index += 1) {
          if (value <= bounds[index]!) {
            series.bucketValues[keys[index]!]! += 1;
            break;
          }
        }
        return;
      }
      histogram.observe(labels, value);
      map = metric.hashMap;
      series = seriesIn(map, labels);
    },
  };
}
