import type { IncomingMessage, ServerResponse } from 'node:http';
import { symbols, type Logger, type pino } from 'pino';
import type { TokenUsage } from '../plugins/plugin-contract.ts';
import type { ExchangeRecord, RecordedUsage } from '../core/exchange.ts';
import { type Observation, EVENTS, type EventSource } from '../core/diagnostics.ts';
import { stampedAddress, requestIdOf } from '../core/incoming-request.ts';
import { NO_MODEL, type GatewayMetrics } from './metrics.ts';
import { MODEL_ROUTES, ROUTE_TABLE } from '../core/route-table.ts';
import { upstreamModelOf } from '../core/model-registry.ts';
import type { GuardrailActionLog } from '../stores/guardrail-actions/guardrail-action-log.ts';
import { guardrailReporter } from './guardrail-reporter.ts';
import { observeWebSockets } from './websocket-observer.ts';

const round = (ms: number): number => Math.round(ms * 1000) / 1000;

export type { Observation };

/** Who sent a request, as its access line names them. */
interface Requester {
  /** The client address (the client a trusted proxy names, else the connection's peer). */
  readonly address: string;
  /** The `User-Agent` header, cut to its first {@link USER_AGENT_CHARS} characters. */
  readonly userAgent: string | undefined;
}

/** The longest user agent an access line keeps (a header may be as long as the header size limit). */
const USER_AGENT_CHARS = 256;

/** Each watched request's sender, by its observation (a model route's exchange, which its record event names). */
const REQUESTERS = new WeakMap<object, Requester>();

/** A request {@link RequestObserver.watch} follows until its answer is done. */
interface Watched {
  readonly observer: RequestObserver;
  readonly req: IncomingMessage;
  readonly observation: Observation;
  readonly requester: Requester;
  readonly startedAt: number;
  durationMs: number;
}

const WATCHED = new WeakMap<ServerResponse, Watched>();

/** Answers done since the last turn of the event loop, settled together in the next one. */
let done: { readonly watched: Watched; readonly status: number }[] = [];

function finished(this: ServerResponse): void {
  const watched = WATCHED.get(this);
  if (watched === undefined) return;
  watched.durationMs = performance.now() - watched.startedAt;
  if (done.length === 0) setImmediate(settleDone);
  done.push({ watched, status: this.statusCode });
}

function settleDone(): void {
  const settling = done;
  done = [];
  for (const { watched, status } of settling) watched.observer.settle(watched, status);
}

function requesterOf(req: IncomingMessage): Requester {
  const agent = req.headers['user-agent'];
  return { address: stampedAddress(req), userAgent: agent?.slice(0, USER_AGENT_CHARS) };
}

/** The observation the way in gave a response (for the Express control plane to fill in), if it is watched. */
export function observationOf(res: ServerResponse): Observation | undefined {
  return WATCHED.get(res)?.observation;
}

/**
 * One access-log line and the metrics of every request. A request that reached a model is told from its
 * usage record (the `exchange:recorded` event); every other one, whichever plane answered it (bad
 * input, authentication, a rate limit, the control plane), through {@link watch} (the `request` event).
 * The line never carries a key, a header or an upstream credential: only the fields below.
 */
export class RequestObserver {
  constructor(
    private readonly logger: Logger,
    private readonly metrics: GatewayMetrics,
  ) {
    for (const route of MODEL_ROUTES) metrics.route(route.metricsLabel);
  }

  /**
   * A request that reached a model, when its answer is done. With `recorded` (its usage is being
   * estimated), the metrics are counted now and the access line is written once the estimate is made,
   * with the tokens the usage record stores (and `tokens_estimated` when any is an estimate).
   */
  exchange(exchange: ExchangeRecord, recorded?: Promise<RecordedUsage>, observation?: object): void {
    const { resolved, usage } = exchange;
    const upstreamMs = exchange.upstreamMs ?? 0;
    const model = resolved.canonicalId;
    this.metrics.request(exchange.route, model, exchange.status, exchange.latencyMs, upstreamMs, exchange.firstByteMs);
    // A cache hit's tokens were not used upstream again: it shows as what it saved.
    if (exchange.cacheHit) this.metrics.cacheSaved(exchange.cacheHit.savedUsd);
    else if (usage) this.metrics.tokensUsed(model, usage.inputTokens, usage.outputTokens, usage.cachedTokens);
    if (usage && !exchange.cacheHit && exchange.endpoint !== undefined)
      this.metrics.cachedInputTokens(resolved.plugin.vendor, exchange.endpoint, usage.cachedTokens);
    if (exchange.status === 429) this.metrics.limited('rate_limit');
    // A GenAI operation is an answer that went upstream: not a cache hit, not a refusal before any attempt.
    if (!exchange.cacheHit && (exchange.attempts ?? 0) > 0) this.genAi(exchange);
    const requester = observation && REQUESTERS.get(observation);
    if (recorded === undefined) this.logExchange(this.logger, exchange, usage, requester);
    // Rare (the client left, or the upstream cut the stream): the child costs nothing on the usual path.
    else {
      void recorded.then((final) => {
        const logger = final.estimated ? this.logger.child({ tokens_estimated: true }) : this.logger;
        this.logExchange(logger, exchange, final.usage, requester);
      });
    }
  }

  private genAi(exchange: ExchangeRecord): void {
    const { usage } = exchange;
    // Recorded once, in prom-client: the OTLP metrics, when on, are read from the same histograms.
    this.metrics.genAi({
      operation: ROUTE_TABLE[exchange.route].genAiOperation,
      provider: exchange.resolved.plugin.vendor,
      requestModel: upstreamModelOf(exchange.resolved, exchange.route),
      inputTokens: usage?.inputTokens,
      outputTokens: usage?.outputTokens,
      durationS: (exchange.upstreamMs ?? 0) / 1000,
      timeToFirstChunkS: exchange.timeToFirstChunkMs === undefined ? undefined : exchange.timeToFirstChunkMs / 1000,
      timePerOutputChunkS:
        exchange.timePerOutputChunkMs === undefined ? undefined : exchange.timePerOutputChunkMs / 1000,
    });
  }

  private logExchange(
    logger: Logger,
    exchange: ExchangeRecord,
    usage: TokenUsage | undefined,
    requester: Requester | undefined,
  ): void {
    const { resolved } = exchange;
    const upstreamMs = exchange.upstreamMs ?? 0;
    // Serialized here, field by field: the line goes out once per request (see `writeInfoLine`).
    writeInfoLine(
      logger,
      logField('request_id', exchange.requestId) +
        logField('route', exchange.route) +
        logField('requested_model', resolved.requestedId) +
        logField('model', resolved.canonicalId) +
        logField('status', exchange.status) +
        logField('outcome', exchange.outcome) +
        logField('stream', exchange.stream) +
        logField('duration_ms', round(exchange.latencyMs)) +
        logField('overhead_ms', round(Math.max(0, exchange.latencyMs - upstreamMs))) +
        logField('ttfb_ms', exchange.firstByteMs === undefined ? undefined : round(exchange.firstByteMs)) +
        logField('input_tokens', usage?.inputTokens) +
        logField('output_tokens', usage?.outputTokens) +
        logField('cached_tokens', usage?.cachedTokens) +
        logField('key_id', exchange.keyId) +
        logField('client_address', requester?.address) +
        logField('user_agent', requester?.userAgent),
      'request',
    );
  }

  /**
   * Every request the way in serves (its `request` event): when the answer is done, the request is
   * counted and logged from what the plane that answered it wrote into its {@link Observation}, unless
   * its route recorded an exchange (observed by {@link exchange}).
   */
  watch(req: IncomingMessage, res: ServerResponse, observation: Observation): void {
    const requester = requesterOf(req);
    REQUESTERS.set(observation, requester);
    WATCHED.set(res, { observer: this, req, observation, requester, startedAt: performance.now(), durationMs: 0 });
    // One listener for every response (no closure, no once wrapper): 'finish' comes at most once.
    res.on('finish', finished);
  }

  /**
   * A watched request whose answer is done. A route ends its answer, then records its exchange as soon as the end is
   * out (a stream's last write and its end leave together): asked after that, `recorded` is settled.
   */
  settle(watched: Watched, status: number): void {
    const { observation } = watched;
    if (observation.recorded) return;
    const route = observation.labelOf?.() ?? observation.label;
    const keyId = observation.keyIdOf?.() ?? observation.keyId;
    if (observation.refusedBy) this.metrics.limitRefused(observation.refusedBy);
    this.answered(watched.req, route, status, watched.durationMs, observation.errorCode, keyId, watched.requester);
  }

  private answered(
    req: IncomingMessage,
    route: string,
    status: number,
    durationMs: number,
    errorCode: string | undefined,
    keyId: string | undefined,
    requester: Requester,
  ): void {
    this.metrics.request(route, NO_MODEL, status, durationMs, 0, undefined);
    if (status === 429)
      this.metrics.limited(
        errorCode === 'GW_ERR_QUOTA_EXCEEDED' || errorCode === 'GW_ERR_BUDGET_EXCEEDED' ? 'quota' : 'rate_limit',
      );
    this.logger.info(
      {
        request_id: requestIdOf(req),
        route,
        method: req.method,
        status,
        error_code: errorCode,
        duration_ms: round(durationMs),
        overhead_ms: round(durationMs),
        key_id: keyId,
        client_address: requester.address,
        user_agent: requester.userAgent,
      },
      'request',
    );
  }
}

export interface ObserverParts {
  readonly logger: Logger;
  /** The access log's own logger (its lines batched apart from the rest). */
  readonly accessLogger: Logger;
  readonly metrics: GatewayMetrics;
  /** Keeps the newest guardrail actions (`GET /admin/guardrails/actions`). */
  readonly guardrailActions?: Pick<GuardrailActionLog, 'record'>;
}

/**
 * Subscribes the gateway's standing observers to its events: the access log and the request metrics,
 * the upstream and cache metrics, the open-streams gauge, the failover warning, the plugin fault log
 * and metric, the guardrail metric, warnings and action log, and the WebSockets' lines and metrics.
 * Gives back the call that unsubscribes them all (a gateway that closes).
 */
export function observeGateway(source: EventSource, parts: ObserverParts): () => void {
  const { logger, metrics } = parts;
  const requests = new RequestObserver(parts.accessLogger, metrics);
  const guardrailActed = guardrailReporter(metrics, logger, parts.guardrailActions);
  const off = [
    EVENTS.request.subscribe(source, ({ req, res, observation }) => requests.watch(req, res, observation)),
    EVENTS.exchangeRecorded.subscribe(source, ({ exchange, record, recorded }) => {
      requests.exchange(record, recorded, exchange);
    }),
    EVENTS.upstreamCall.subscribe(source, ({ provider, origin, outcome }) =>
      metrics.upstreamAttempt(provider, origin, outcome),
    ),
    EVENTS.cache.subscribe(source, ({ result }) => metrics.cacheResult(result)),
    EVENTS.streamOpened.subscribe(source, () => metrics.streamOpened()),
    EVENTS.streamClosed.subscribe(source, () => metrics.streamClosed()),
    EVENTS.guardrail.subscribe(source, ({ acted }) => guardrailActed(acted)),
    observeWebSockets(source, parts.accessLogger, metrics),
    // The failover warning: the endpoint by its configured name, never its URL or key.
    EVENTS.endpointFailed.subscribe(source, (failed) => {
      const what = failed.status === undefined ? failed.reason : `answered ${failed.status}`;
      logger.warn(
        {
          provider: failed.provider,
          endpoint: failed.endpoint,
          status: failed.status,
          request_id: failed.exchange.requestId,
        },
        `upstream endpoint '${failed.endpoint}' of provider '${failed.provider}' ${what}`,
      );
    }),
    EVENTS.pluginFault.subscribe(source, (fault) => {
      metrics.pluginError(fault.plugin, fault.hook);
      logger.error(
        {
          plugin: fault.plugin,
          hook: fault.hook,
          route: fault.route,
          model: fault.model,
          request_id: fault.requestId,
          err: fault.cause,
        },
        `gateway plugin '${fault.plugin}' failed in its hook '${fault.hook}'`,
      );
    }),
  ];
  return () => off.forEach((unsubscribe) => unsubscribe());
}

// ---------------------------------------------------------------------------------------------------
// The access line, written in pino's frame.

/** One field of a log line as pino writes it: `,"name":value`, or nothing for an undefined value. */
export function logField(name: string, value: string | number | boolean | undefined): string {
  if (value === undefined) return '';
  if (typeof value === 'string')
    return `,"${name}":${NOTHING_TO_ESCAPE.test(value) ? `"${value}"` : JSON.stringify(value)}`;
  return `,"${name}":${typeof value === 'number' && !Number.isFinite(value) ? 'null' : String(value)}`;
}

/** Printable ASCII but `"` and `\`: a string JSON writes as it is, between quotes (ids, routes, models, addresses). */
const NOTHING_TO_ESCAPE = /^[\x20\x21\x23-\x5b\x5d-\x7e]*$/;

/** pino's state a line is framed with (see {@link writeInfoLine}). */
interface PinoFrame {
  readonly [symbols.lsCacheSym]: Record<number, string>;
  readonly [symbols.timeSym]: () => string;
  readonly [symbols.chindingsSym]: string;
  readonly [symbols.endSym]: string;
  readonly [symbols.streamSym]: pino.DestinationStream & { readonly [symbols.needsMetadataGsym]?: boolean };
  readonly [symbols.mixinSym]?: unknown;
  readonly [symbols.nestedKeySym]?: unknown;
  readonly [symbols.messageKeySym]: string;
  readonly [symbols.formattersSym]: { readonly log?: unknown };
  readonly [symbols.hooksSym]: { readonly streamWrite?: unknown };
}

const INFO = 30;

/**
 * Writes the line `logger.info(fields, msg)` writes, from fields already serialized ({@link logField}, in order):
 * pino's level, time and bindings (a child's included), the fields, the message. The access log writes a line per
 * request, and pino's serializer walks the object and escapes every key of it each time (about 10 µs and 4 KB of
 * garbage per line, measured). A logger configured beyond what this frames (a mixin, a log formatter, a message
 * prefix, a nested key, a write hook, a stream that reads each line's metadata) gets its fields as an object through
 * pino.
 */
export function writeInfoLine(logger: Logger, fields: string, msg: string): void {
  if (!logger.isLevelEnabled('info')) return;
  const frame = logger as unknown as PinoFrame;
  const stream = frame[symbols.streamSym];
  if (
    frame[symbols.mixinSym] ||
    logger.msgPrefix !== undefined ||
    frame[symbols.nestedKeySym] ||
    frame[symbols.formattersSym].log ||
    frame[symbols.hooksSym].streamWrite ||
    stream[symbols.needsMetadataGsym] === true
  ) {
    logger.info(JSON.parse(`{${fields.slice(1)}}`) as object, msg);
    return;
  }
  stream.write(
    `${frame[symbols.lsCacheSym][INFO]}${frame[symbols.timeSym]()}${frame[symbols.chindingsSym]}${fields},"${frame[symbols.messageKeySym]}":${JSON.stringify(msg)}${frame[symbols.endSym]}`,
  );
}
