import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Request, RequestHandler, Response } from 'express';
import type { Logger } from 'pino';
import { isGatewayError } from '../errors/gateway-errors.ts';
import type { ResolvedModel } from '../plugins/model-registry.ts';
import type { TokenUsage, UpstreamRouteId, WireFormat } from '../plugins/plugin-contract.ts';
import type { CallerKey, Exchange, RecordedUsage, UsageAccounting } from '../routes/route-services.ts';
import { NO_MODEL, type GatewayMetrics } from './metrics.ts';
import { requestIdOf } from './request-id.ts';
import { MODEL_ROUTES, modelRouteAt } from '../core/route-table.ts';


const round = (ms: number): number => Math.round(ms * 1000) / 1000;

/**
 * One access-log line and the metrics of every request. A request that reached a model is told from its
 * {@link Exchange} (through {@link ObservedUsageAccounting}); one answered before that (bad input,
 * authentication, a rate limit) from its error; everything Express serves from its `finish` event.
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
  exchange(exchange: Exchange, recorded?: Promise<RecordedUsage>): void {
    const { resolved, usage } = exchange;
    const upstreamMs = exchange.upstreamMs ?? 0;
    const model = resolved.canonicalId;
    this.metrics.request(exchange.route, model, exchange.status, exchange.latencyMs, upstreamMs, exchange.firstByteMs);
    if (usage) this.metrics.tokensUsed(model, usage.inputTokens, usage.outputTokens, usage.cachedTokens);
    if (exchange.status === 429) this.metrics.limited('rate_limit');
    if (recorded === undefined) this.logExchange(this.logger, exchange, usage);
    // Rare (the client left, or the upstream cut the stream): the child costs nothing on the usual path.
    else void recorded.then((final) => this.logExchange(final.estimated ? this.logger.child({ tokens_estimated: true }) : this.logger, exchange, final.usage));
  }

  private logExchange(logger: Logger, exchange: Exchange, usage: TokenUsage | undefined): void {
    const { resolved } = exchange;
    const upstreamMs = exchange.upstreamMs ?? 0;
    const model = resolved.canonicalId;
    logger.info(
      {
        request_id: exchange.requestId,
        route: exchange.route,
        requested_model: resolved.requestedId,
        model,
        status: exchange.status,
        outcome: exchange.outcome,
        stream: exchange.stream,
        duration_ms: round(exchange.latencyMs),
        overhead_ms: round(Math.max(0, exchange.latencyMs - upstreamMs)),
        ttfb_ms: exchange.firstByteMs === undefined ? undefined : round(exchange.firstByteMs),
        input_tokens: usage?.inputTokens,
        output_tokens: usage?.outputTokens,
        cached_tokens: usage?.cachedTokens,
        key_id: exchange.keyId,
      },
      'request',
    );
  }

  /** A model-route request answered with an error before it reached a model (no exchange). */
  rejected(req: IncomingMessage, res: ServerResponse, path: string, error: unknown, durationMs: number): void {
    const status = isGatewayError(error) ? error.status : 500;
    this.answered(req, modelRouteAt(path)?.metricsLabel ?? path, status, durationMs, isGatewayError(error) ? error.code : undefined, (res as { locals?: { apiKey?: CallerKey } }).locals?.apiKey?.id);
  }

  /** Express middleware: observes every request Express answers, unless its route recorded an exchange. */
  express(): RequestHandler {
    const observer = this;
    return function observeRequest(req: Request, res: Response, next) {
      const startedAt = performance.now();
      res.once('finish', () => {
        if (res.locals.recorded) return;
        // The matched route's pattern (bounded), never the raw path.
        const route = req.route?.path ? `${req.baseUrl}${String(req.route.path)}` : 'unmatched';
        observer.answered(req, route, res.statusCode, performance.now() - startedAt, res.locals.errorCode as string | undefined, (res.locals.apiKey as CallerKey | undefined)?.id);
      });
      next();
    };
  }

  private answered(req: IncomingMessage, route: string, status: number, durationMs: number, errorCode: string | undefined, keyId: string | undefined): void {
    this.metrics.request(route, NO_MODEL, status, durationMs, 0, undefined);
    if (status === 429) this.metrics.limited(errorCode === 'GW_ERR_QUOTA_EXCEEDED' ? 'quota' : 'rate_limit');
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
      },
      'request',
    );
  }
}

/** Usage accounting that also hands each exchange to the {@link RequestObserver} (the single per-request hook). */
export class ObservedUsageAccounting implements UsageAccounting {
  constructor(
    private readonly inner: UsageAccounting,
    private readonly observer: RequestObserver,
  ) {}

  checkQuota(caller: CallerKey | undefined): Promise<void> {
    return this.inner.checkQuota(caller);
  }

  extractor(format: WireFormat, route: UpstreamRouteId, resolved: ResolvedModel) {
    return this.inner.extractor(format, route, resolved);
  }

  streamedText(format: WireFormat, data: string): string {
    return this.inner.streamedText(format, data);
  }

  charge(usage: TokenUsage, resolved: ResolvedModel) {
    return this.inner.charge(usage, resolved);
  }

  record(exchange: Exchange): Promise<RecordedUsage> | undefined {
    const recorded = this.inner.record(exchange);
    try {
      this.observer.exchange(exchange, recorded);
    } catch {
      // Observation must never cost a request its usage record.
    }
    return recorded;
  }
}
