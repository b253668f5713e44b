import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import type { LimitRefusal } from '../core/gateway-errors.ts';
import type { Meter } from '../core/limits.ts';
import { GENAI_BUCKETS, type GenAiMetrics, type GenAiObservation } from './genai-observation.ts';

/** Why the connection caps refused a connection or a request, as `gateway_refusals_total` counts it. */
export type RefusalReason = 'max_connections' | 'connections_per_address' | 'pending_requests_per_address';

/** How one upstream attempt ended, as `gateway_upstream_requests_total` counts it. */
export type UpstreamOutcome = 'ok' | 'error_status' | 'transport_error' | 'timeout' | 'aborted';

/** What `gateway_build_info` says of the running gateway. */
export interface BuildInfo {
  /** The package version. */
  readonly version: string;
  /** The source revision the image was built from (`GATEWAY_REVISION`), `unknown` when not given. */
  readonly revision: string;
}

/** One upstream endpoint's state for `gateway_endpoint_up`. */
export interface EndpointHealth {
  readonly provider: string;
  readonly endpoint: string;
  readonly up: boolean;
}

/**
 * What the upstream side reports into (the endpoint pools plug in here): every attempt, and a way to
 * read each endpoint's state when Prometheus scrapes.
 */
export interface UpstreamMetrics {
  upstreamAttempt(provider: string, endpoint: string, outcome: UpstreamOutcome): void;
  /** Replaces the source `gateway_endpoint_up` reads at scrape time (default: the last attempt's outcome). */
  setEndpointStates(read: () => Iterable<EndpointHealth>): void;
}

const ROUTE_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300];
const OVERHEAD_BUCKETS = [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1];

/** The label value of requests that never reached a model (rejected before one was resolved). */
export const NO_MODEL = 'none';

type LabelledCounter = ReturnType<Counter<string>['labels']>;
type LabelledHistogram = ReturnType<Histogram<string>['labels']>;

/** The GenAI histograms' children of one operation, provider and requested model. */
interface GenAiChildren {
  readonly inputTokens: LabelledHistogram;
  readonly outputTokens: LabelledHistogram;
  readonly duration: LabelledHistogram;
  readonly firstChunk: LabelledHistogram;
  readonly perChunk: LabelledHistogram;
}

interface RouteChildren {
  readonly duration: LabelledHistogram;
  readonly overhead: LabelledHistogram;
  readonly firstByte: LabelledHistogram;
  /** model → status → counter */
  readonly requests: Map<string, Map<number, LabelledCounter>>;
}

/**
 * The gateway's Prometheus metrics on a registry of its own (one per gateway, so tests can run several).
 * Label values are bounded: routes are the gateway's own route names, models the registry's canonical
 * ids, statuses HTTP statuses; no key material. Labelled children are created once and kept, so a
 * request costs a few map lookups and increments.
 */
export class GatewayMetrics implements UpstreamMetrics, GenAiMetrics {
  readonly registry = new Registry();
  private readonly requests: Counter<'route' | 'model' | 'status'>;
  private readonly duration: Histogram<'route'>;
  private readonly overhead: Histogram<'route'>;
  private readonly firstByte: Histogram<'route'>;
  private readonly tokens: Counter<'model' | 'type'>;
  private readonly cachedInput: Counter<'provider' | 'endpoint'>;
  private readonly upstreamRequests: Counter<'provider' | 'endpoint' | 'outcome'>;
  private readonly rateLimited: Counter<'reason'>;
  private readonly limitRefusals: Counter<'kind' | 'scope'>;
  private readonly configReloads: Counter<'result'>;
  private readonly refusals: Counter<'reason'>;
  private readonly pluginErrors: Counter<'plugin' | 'hook'>;
  private readonly guardrailActions: Counter<'guardrail' | 'phase' | 'action'>;
  private readonly cacheResults: Counter<'result'>;
  private readonly cacheStoredBytes: Counter;
  private readonly cacheEvictedBytes: Counter;
  private readonly cacheSavedUsd: Counter;
  private readonly genAiTokens: Histogram<
    'gen_ai_operation_name' | 'gen_ai_provider_name' | 'gen_ai_request_model' | 'gen_ai_token_type'
  >;
  private readonly genAiDuration: Histogram<'gen_ai_operation_name' | 'gen_ai_provider_name' | 'gen_ai_request_model'>;
  private readonly genAiFirstChunk: Histogram<
    'gen_ai_operation_name' | 'gen_ai_provider_name' | 'gen_ai_request_model'
  >;
  private readonly genAiPerChunk: Histogram<'gen_ai_operation_name' | 'gen_ai_provider_name' | 'gen_ai_request_model'>;
  private readonly genAiChildren = new Map<string, GenAiChildren>();
  private readonly spansExported: Counter;
  private readonly spansDropped: Counter<'reason'>;
  private readonly routes = new Map<string, RouteChildren>();
  private readonly tokenChildren = new Map<string, readonly [LabelledCounter, LabelledCounter, LabelledCounter]>();
  /** provider → endpoint name → counter */
  private readonly cachedInputChildren = new Map<string, Map<string, LabelledCounter>>();
  private readonly lastOutcome = new Map<string, EndpointHealth>();
  private readonly attemptChildren = new Map<string, LabelledCounter>();
  private readonly cacheResultChildren = new Map<string, LabelledCounter>();
  private endpointStates: () => Iterable<EndpointHealth> = () => this.lastOutcome.values();
  private openStreams = 0;
  private openWebSockets = 0;
  private readonly webSocketReceived: Counter<'type'>;
  private readonly webSocketSent: Counter;
  private readonly webSocketCloses: Counter<'code'>;
  /** `scope period kind` → counter → its use ratio and when its window ends. */
  private readonly limitUses = new Map<string, Map<string, { ratio: number; resetAt: number }>>();

  constructor(sources: { usageQueueDepth?: () => number; configStale?: () => boolean; build?: BuildInfo } = {}) {
    const registers = [this.registry];
    collectDefaultMetrics({ register: this.registry });
    this.requests = new Counter({
      name: 'gateway_requests_total',
      help: 'Requests answered, by route, canonical model and status',
      labelNames: ['route', 'model', 'status'],
      registers,
    });
    this.duration = new Histogram({
      name: 'gateway_request_duration_seconds',
      help: 'Time from the request to the end of its answer',
      labelNames: ['route'],
      buckets: ROUTE_BUCKETS,
      registers,
    });
    this.overhead = new Histogram({
      name: 'gateway_overhead_seconds',
      help: 'Time the gateway itself added: the duration minus the time waiting on the upstream',
      labelNames: ['route'],
      buckets: OVERHEAD_BUCKETS,
      registers,
    });
    this.firstByte = new Histogram({
      name: 'gateway_time_to_first_byte_seconds',
      help: 'Time from the request to the answer status and headers',
      labelNames: ['route'],
      buckets: ROUTE_BUCKETS,
      registers,
    });
    this.tokens = new Counter({
      name: 'gateway_tokens_total',
      help: 'Tokens the upstreams reported, by canonical model and type',
      labelNames: ['model', 'type'],
      registers,
    });
    this.cachedInput = new Counter({
      name: 'gateway_cached_input_tokens_total',
      help: "Input tokens the upstreams reported as read from their prompt cache, by provider and endpoint (its configured name), to see prompt-cache-aware routing's effect",
      labelNames: ['provider', 'endpoint'],
      registers,
    });
    this.upstreamRequests = new Counter({
      name: 'gateway_upstream_requests_total',
      help: 'Upstream attempts by provider, endpoint and outcome',
      labelNames: ['provider', 'endpoint', 'outcome'],
      registers,
    });
    this.rateLimited = new Counter({
      name: 'gateway_rate_limited_total',
      help: 'Requests answered 429, by reason',
      labelNames: ['reason'],
      registers,
    });
    this.limitRefusals = new Counter({
      name: 'gateway_limit_refusals_total',
      help: 'Requests refused by a limit, by what it counts (rpm, tpm, quota, budget, concurrency) and whose it is (key, team, group, end_user, address)',
      labelNames: ['kind', 'scope'],
      registers,
    });
    this.configReloads = new Counter({
      name: 'gateway_config_reloads_total',
      help: 'Configuration reloads by result',
      labelNames: ['result'],
      registers,
    });
    this.pluginErrors = new Counter({
      name: 'gateway_plugin_errors_total',
      help: 'Plugin hooks that threw or returned a wrong shape (the answer ended with a plugin fault), by plugin and hook',
      labelNames: ['plugin', 'hook'],
      registers,
    });
    this.guardrailActions = new Counter({
      name: 'gateway_guardrail_actions_total',
      help: 'What guardrails did, by guardrail (its configured name), phase (request, response) and action (block, redact, fail_open: a webhook that did not answer let the text pass)',
      labelNames: ['guardrail', 'phase', 'action'],
      registers,
    });
    this.cacheResults = new Counter({
      name: 'gateway_cache_requests_total',
      help: 'Requests the response cache was asked about, by result (hit, miss, bypass)',
      labelNames: ['result'],
      registers,
    });
    this.cacheStoredBytes = new Counter({
      name: 'gateway_cache_stored_bytes_total',
      help: 'Bytes of answers written to the response cache',
      registers,
    });
    this.cacheEvictedBytes = new Counter({
      name: 'gateway_cache_evicted_bytes_total',
      help: 'Bytes of entries the embedded response cache dropped to stay within cache.maxBytes',
      registers,
    });
    this.cacheSavedUsd = new Counter({
      name: 'gateway_cache_saved_usd_total',
      help: 'What the answers served from the response cache would have cost upstream, in USD',
      registers,
    });
    const genAiLabels = ['gen_ai_operation_name', 'gen_ai_provider_name', 'gen_ai_request_model'] as const;
    this.genAiTokens = new Histogram({
      name: 'gen_ai_client_token_usage',
      help: 'gen_ai.client.token.usage: tokens each upstream operation used, by token type (input, output), as the upstream reported them',
      labelNames: [...genAiLabels, 'gen_ai_token_type'],
      buckets: [...GENAI_BUCKETS.tokens],
      registers,
    });
    this.genAiDuration = new Histogram({
      name: 'gen_ai_client_operation_duration_seconds',
      help: 'gen_ai.client.operation.duration: from the first upstream attempt to the end of the answer',
      labelNames: genAiLabels,
      buckets: [...GENAI_BUCKETS.duration],
      registers,
    });
    this.genAiFirstChunk = new Histogram({
      name: 'gen_ai_client_operation_time_to_first_chunk_seconds',
      help: 'gen_ai.client.operation.time_to_first_chunk: from the serving attempt to its first content event (streams)',
      labelNames: genAiLabels,
      buckets: [...GENAI_BUCKETS.duration],
      registers,
    });
    this.genAiPerChunk = new Histogram({
      name: 'gen_ai_client_operation_time_per_output_chunk_seconds',
      help: 'gen_ai.client.operation.time_per_output_chunk: the mean time between the content events after the first, one observation per stream',
      labelNames: genAiLabels,
      buckets: [...GENAI_BUCKETS.perChunk],
      registers,
    });
    this.spansExported = new Counter({
      name: 'gateway_trace_spans_exported_total',
      help: 'Spans the OTLP exporter delivered to the collector',
      registers,
    });
    this.spansDropped = new Counter({
      name: 'gateway_trace_spans_dropped_total',
      help: 'Spans lost, by reason: queue_full (the export queue was full: the collector is slow or down), export_failed (an export failed after its retries)',
      labelNames: ['reason'],
      registers,
    });
    for (const reason of ['queue_full', 'export_failed']) this.spansDropped.labels(reason).inc(0);
    this.refusals = new Counter({
      name: 'gateway_refusals_total',
      help: 'Connections and requests refused by the connection caps, by reason',
      labelNames: ['reason'],
      registers,
    });
    // prom-client calls `collect` with the gauge as `this`; the metrics object is reached through `self`.
    // eslint-disable-next-line @typescript-eslint/no-this-alias
    const self = this;
    new Gauge({
      name: 'gateway_endpoint_up',
      help: 'Whether an upstream endpoint takes requests (1) or not (0)',
      labelNames: ['provider', 'endpoint'],
      registers,
      // Across workers: 0 as soon as one worker rests the endpoint (rests are shared through Redis anyway).
      aggregator: 'min',
      collect() {
        this.reset();
        for (const state of self.endpointStates())
          this.set({ provider: state.provider, endpoint: state.endpoint }, state.up ? 1 : 0);
      },
    });
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
      name: 'gateway_open_streams',
      help: 'Streamed answers being relayed now',
      registers,
      aggregator: 'sum',
      collect() {
        this.set(self.openStreams);
      },
    });
    new Gauge({
      name: 'gateway_usage_queue_depth',
      help: 'Usage records taken but not yet stored',
      registers,
      aggregator: 'sum',
      collect() {
        this.set(sources.usageQueueDepth?.() ?? 0);
      },
    });
    new Gauge({
      name: 'gateway_config_stale',
      help: 'Whether the last config reload was refused, so an older configuration serves (1) or not (0)',
      registers,
      aggregator: 'max',
      collect() {
        this.set(sources.configStale?.() ? 1 : 0);
      },
    });
    // Shown at 0 from the start, so a rate or an alert on them has a series before the first event.
    for (const reason of ['rate_limit', 'quota']) this.rateLimited.labels(reason).inc(0);
    for (const kind of ['rpm', 'tpm', 'quota', 'budget']) {
      for (const scope of ['key', 'team', 'end_user']) this.limitRefusals.labels(kind, scope).inc(0);
    }
    // A group carries no request rate: only its token and money limits refuse.
    for (const kind of ['tpm', 'quota', 'budget']) this.limitRefusals.labels(kind, 'group').inc(0);
    for (const result of ['applied', 'rejected']) this.configReloads.labels(result).inc(0);
    for (const result of ['hit', 'miss', 'bypass']) this.cacheResults.labels(result).inc(0);
    for (const reason of ['max_connections', 'connections_per_address', 'pending_requests_per_address'])
      this.refusals.labels(reason).inc(0);
    new Gauge({
      name: 'gateway_websocket_connections',
      help: 'Responses WebSockets open now',
      registers,
      aggregator: 'sum',
      collect() {
        this.set(self.openWebSockets);
      },
    });
    this.webSocketReceived = new Counter({
      name: 'gateway_websocket_messages_received_total',
      help: 'Messages clients sent on WebSockets, by type: response.create, response.cancel, invalid (not taken)',
      labelNames: ['type'],
      registers,
    });
    this.webSocketSent = new Counter({
      name: 'gateway_websocket_messages_sent_total',
      help: 'Messages sent on WebSockets: the events of responses, errors, acknowledgements',
      registers,
    });
    this.webSocketCloses = new Counter({
      name: 'gateway_websocket_closes_total',
      help: 'WebSockets closed, by close code (1006: the connection ended without one)',
      labelNames: ['code'],
      registers,
    });
    for (const type of ['response.create', 'response.cancel', 'invalid']) this.webSocketReceived.labels(type).inc(0);
    new Gauge({
      name: 'gateway_limit_used_ratio',
      help:
        'The highest use over limit (reservations in flight included) among the money budgets (kind budget) and token ' +
        'quotas (kind quota) of keys, teams and groups (scope) for the UTC day or month (period), as settlements ' +
        'this instance saw left them in the windows still open; 1 is the whole limit',
      labelNames: ['scope', 'period', 'kind'],
      registers,
      aggregator: 'max',
      collect() {
        this.reset();
        const now = Date.now();
        for (const [labels, uses] of self.limitUses) {
          let highest: number | undefined;
          for (const [counter, use] of uses) {
            if (use.resetAt <= now) uses.delete(counter);
            else highest = Math.max(highest ?? 0, use.ratio);
          }
          const [scope, period, kind] = labels.split(' ');
          if (highest !== undefined) this.set({ scope, period, kind }, highest);
          else self.limitUses.delete(labels);
        }
      },
    });
  }

  /** A day's or month's budget or quota as a settlement left it (`used` in the meter's unit, as its `limit`). */
  limitUse(meter: Pick<Meter, 'scope' | 'period' | 'kind' | 'counter' | 'limit' | 'resetAt'>, used: number): void {
    const labels = `${meter.scope} ${meter.period} ${meter.kind}`;
    let uses = this.limitUses.get(labels);
    if (!uses) this.limitUses.set(labels, (uses = new Map()));
    // Bounded: a full map starts over (each scrape drops the windows that ended).
    if (uses.size >= 10_000 && !uses.has(meter.counter)) uses.clear();
    uses.set(meter.counter, { ratio: meter.limit > 0 ? used / meter.limit : 0, resetAt: meter.resetAt });
  }

  webSocketOpened(): void {
    this.openWebSockets += 1;
  }

  /** A close code as a label: the protocol's (1000-1015) as they are, an application's (3000-4999) as `application`. */
  webSocketClosed(code: number): void {
    this.openWebSockets -= 1;
    const label = code >= 1000 && code <= 1015 ? String(code) : code >= 3000 && code <= 4999 ? 'application' : 'other';
    this.webSocketCloses.labels(label).inc();
  }

  /** A message a client sent, answered with `sent` messages. */
  webSocketMessage(type: string, sent: number): void {
    this.webSocketReceived.labels(type).inc();
    this.webSocketSent.inc(sent);
  }

  /** Precreates the children of the routes (call with every route name at start). */
  route(route: string): RouteChildren {
    let children = this.routes.get(route);
    if (children === undefined) {
      children = {
        duration: this.duration.labels(route),
        overhead: this.overhead.labels(route),
        firstByte: this.firstByte.labels(route),
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
    if (counter === undefined) byStatus.set(status, (counter = this.requests.labels(route, model, String(status))));
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
      const labels = [observation.operation, observation.provider, observation.requestModel] as const;
      children = {
        inputTokens: this.genAiTokens.labels(...labels, 'input'),
        outputTokens: this.genAiTokens.labels(...labels, 'output'),
        duration: this.genAiDuration.labels(...labels),
        firstChunk: this.genAiFirstChunk.labels(...labels),
        perChunk: this.genAiPerChunk.labels(...labels),
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
    this.spansExported.inc(count);
  }

  /** Spans lost: the export queue was full, or an export failed. */
  tracesDropped(reason: 'queue_full' | 'export_failed', count: number): void {
    this.spansDropped.labels(reason).inc(count);
  }

  /** A request the response cache was asked about. */
  cacheResult(result: 'hit' | 'miss' | 'bypass'): void {
    let child = this.cacheResultChildren.get(result);
    if (child === undefined) this.cacheResultChildren.set(result, (child = this.cacheResults.labels(result)));
    child.inc();
  }

  cacheStored(bytes: number): void {
    this.cacheStoredBytes.inc(bytes);
  }

  cacheEvicted(bytes: number): void {
    this.cacheEvictedBytes.inc(bytes);
  }

  /** An answer served from the cache, and what it would have cost. */
  cacheSaved(usd: number): void {
    if (usd > 0) this.cacheSavedUsd.inc(usd);
  }

  /** A plugin hook threw or returned a wrong shape. */
  pluginError(plugin: string, hook: string): void {
    this.pluginErrors.labels(plugin, hook).inc();
  }

  /** A guardrail blocked or redacted a request's or an answer's text, or (`fail_open`) let it pass unchecked. */
  guardrailAction(guardrail: string, phase: 'request' | 'response', action: 'block' | 'redact' | 'fail_open'): void {
    this.guardrailActions.labels(guardrail, phase, action).inc();
  }

  tokensUsed(model: string, input: number, output: number, cached: number): void {
    let children = this.tokenChildren.get(model);
    if (children === undefined) {
      children = [
        this.tokens.labels(model, 'input'),
        this.tokens.labels(model, 'output'),
        this.tokens.labels(model, 'cached'),
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
    if (counter === undefined) byEndpoint.set(endpoint, (counter = this.cachedInput.labels(provider, endpoint)));
    counter.inc(cached > 0 ? cached : 0);
  }

  /** A request refused by a key's, team's or address's limit (`rpm`, `tpm`, `quota`, `budget`, `concurrency`). */
  limitRefused({ kind, scope }: LimitRefusal): void {
    this.limitRefusals.labels(kind, scope).inc();
  }

  /** A 429: `rate_limit` (request limits, failed-auth throttle) or `quota` (token quotas). */
  limited(reason: 'rate_limit' | 'quota'): void {
    this.rateLimited.labels(reason).inc();
  }

  refused(reason: RefusalReason): void {
    this.refusals.labels(reason).inc();
  }

  configReload(result: 'applied' | 'rejected'): void {
    this.configReloads.labels(result).inc();
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
      this.attemptChildren.set(childKey, (child = this.upstreamRequests.labels(provider, endpoint, outcome)));
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
