import type { ClientRead } from '../http/client-write-timeout.ts';
import type { ResolvedModel } from '../../core/model-registry.ts';
import type { RouteId, TokenUsage } from '../../plugins/plugin-contract.ts';
import { newTally, type AttemptTally } from '../upstream/failover/attempt-upstream.ts';
import type { UsageOutcome } from '../../core/exchange.ts';
import type { Exchange } from '../../core/exchange.ts';
import type { RouteServices } from '../route-services.ts';
import type { TextSample } from '../../core/exchange.ts';
import type { RequestContext } from '../request-context.ts';

/** What a request's usage record holds from the start, apart from the figures its answer adds. */
export interface ExchangeBasis {
  readonly keyId: string | undefined;
  readonly route: RouteId;
  readonly stream: boolean;
  readonly requestId: string | undefined;
  readonly startedAt: number;
  readonly requestBody: () => Record<string, unknown>;
  readonly responseText: () => string | TextSample;
}

/**
 * The record stage of a model route: the request's timings and attempts as they happen, and its one
 * usage record (with the request's context marked for the access log) once its answer ended.
 */
export class ExchangeRecorder {
  readonly tally: AttemptTally = newTally();
  /** When the first upstream attempt started and the answer's body was read (0: not yet). */
  upstreamAt = 0;
  upstreamDoneAt = 0;
  /** Time spent in attempts, when the route sums them (waits between retries left out); else from `upstreamAt`. */
  upstreamSpentMs: number | undefined;
  /** When the status went out (0: not yet). */
  firstByteAt = 0;
  /** Set when the response cache answered (see `Exchange.cacheHit`). */
  cacheHit: { readonly savedUsd: number } | undefined;

  constructor(
    private readonly services: RouteServices,
    private readonly context: Pick<RequestContext, 'upstreamEndpoint' | 'upstreamAttempts' | 'recorded' | 'reservation'>,
    private readonly basis: ExchangeBasis,
    /** The model that served (a fallback's, once the route moved on to one). */
    public model: ResolvedModel,
  ) {}

  /** The request's id, for logs. */
  get requestId(): string | undefined {
    return this.basis.requestId;
  }

  /** Where a plugin fault in this exchange happened: its route, the model serving it and its request id. */
  faultSite(route: string): { route: string; model: string; requestId: string | undefined } {
    return { route, model: this.model.canonicalId, requestId: this.basis.requestId };
  }

  record(status: number, usage: TokenUsage | undefined, consumed: boolean, outcome: UsageOutcome = status === 499 ? 'client_closed' : 'complete'): void {
    const { basis, tally } = this;
    const exchange: Exchange = {
      keyId: basis.keyId,
      route: basis.route,
      resolved: this.model,
      status,
      stream: basis.stream,
      latencyMs: performance.now() - basis.startedAt,
      requestId: basis.requestId,
      upstreamMs: this.upstreamSpentMs ?? (this.upstreamAt === 0 ? 0 : (this.upstreamDoneAt || performance.now()) - this.upstreamAt),
      firstByteMs: this.firstByteAt === 0 ? undefined : this.firstByteAt - basis.startedAt,
      usage,
      consumed,
      outcome,
      endpoint: tally.endpoint?.name,
      attempts: tally.count,
      unreportedAttempts: tally.unreported,
      requestBody: basis.requestBody,
      responseText: basis.responseText,
      settlement: this.context.reservation,
      ...(this.cacheHit && { cacheHit: this.cacheHit }),
    };
    this.context.reservation?.handOver();
    this.context.upstreamEndpoint = tally.endpoint?.name;
    this.context.upstreamAttempts = tally.count;
    this.context.recorded = true;
    this.services.usage.record(exchange);
  }

  /**
   * An answer's end, as the client took it: a client that left is a 499, one that stopped reading is
   * `client_stalled` (the status it was sent is kept).
   */
  recordEnd(read: ClientRead, status: number, usage: TokenUsage | undefined, consumed: boolean, outcome?: UsageOutcome): void {
    if (read === 'taken') this.record(status, usage, consumed, outcome);
    else if (read === 'closed') this.record(499, usage, consumed);
    else this.record(status, usage, consumed, 'client_stalled');
  }

  /** Records an error answer and throws it, for the error middleware to send. */
  fail(error: { readonly status: number }, consumed = false, usage?: TokenUsage, outcome?: UsageOutcome): never {
    this.record(error.status, usage, consumed, outcome);
    throw error;
  }
}
