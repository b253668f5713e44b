import type { ClientRead } from '../http/client-write-timeout.ts';
import type { ResolvedModel } from '../../core/model-registry.ts';
import type { RouteId, TokenUsage } from '../../plugins/plugin-contract.ts';
import { newTally, type AttemptTally } from '../upstream/failover/attempt-upstream.ts';
import type { UsageOutcome } from '../../core/exchange.ts';
import type { Exchange } from '../../core/exchange.ts';
import type { RouteServices } from '../route-services.ts';
import type { TextSample } from '../../core/exchange.ts';
import type { RequestContext } from '../request-context.ts';
import type { GuardrailRun } from '../guardrails/guardrail-run.ts';
import type { AnswerFacts } from '../../core/formats/index.ts';
import type { RequestTrace } from '../../ops/tracing/request-trace.ts';

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
  /** When the latest upstream attempt started, and when its stream's first content event came (0: none). */
  attemptAt = 0;
  firstContentAt = 0;
  /** Events relayed of a stream, for the time per output chunk. */
  streamEvents = 0;
  /** The upstream's status of the answer relayed. */
  upstreamStatus: number | undefined;
  /** What a traced answer said of itself (model, id, finish reasons); only read while the trace records. */
  facts: AnswerFacts | undefined;
  /** The answer's text, for traces that capture message content. */
  outputText: (() => string) | undefined;

  constructor(
    private readonly services: RouteServices,
    private readonly context: Pick<RequestContext, 'upstreamEndpoint' | 'upstreamAttempts' | 'recorded' | 'reservation' | 'trace' | 'guardrails'>,
    private readonly basis: ExchangeBasis,
    /** The model that served (a fallback's, once the route moved on to one). */
    public model: ResolvedModel,
  ) {}

  /** The request's id, for logs. */
  get requestId(): string | undefined {
    return this.basis.requestId;
  }

  /** The request's trace, when tracing is on. */
  get trace(): RequestTrace | undefined {
    return this.context.trace;
  }

  /** The guardrails the request runs under, when it gets any. */
  get guardrails(): GuardrailRun | undefined {
    return this.context.guardrails;
  }

  /** Where a plugin fault in this exchange happened: its route, the model serving it, its request id and trace. */
  faultSite(route: string): { route: string; model: string; requestId: string | undefined; trace: RequestTrace | undefined } {
    return { route, model: this.model.canonicalId, requestId: this.basis.requestId, trace: this.context.trace };
  }

  record(status: number, usage: TokenUsage | undefined, consumed: boolean, outcome: UsageOutcome = status === 499 ? 'client_closed' : 'complete'): void {
    const { basis, tally } = this;
    const trace = this.context.trace;
    const reservation = this.context.reservation;
    const end = performance.now();
    const exchange: Exchange = {
      keyId: basis.keyId,
      route: basis.route,
      resolved: this.model,
      status,
      stream: basis.stream,
      latencyMs: end - basis.startedAt,
      requestId: basis.requestId,
      upstreamMs: this.upstreamSpentMs ?? (this.upstreamAt === 0 ? 0 : (this.upstreamDoneAt || end) - this.upstreamAt),
      firstByteMs: this.firstByteAt === 0 ? undefined : this.firstByteAt - basis.startedAt,
      usage,
      consumed,
      outcome,
      endpoint: tally.endpoint?.name,
      attempts: tally.count,
      unreportedAttempts: tally.unreported,
      requestBody: basis.requestBody,
      responseText: basis.responseText,
      settlement: reservation && trace?.recording ? trace.settlement(reservation) : reservation,
      ...(this.firstContentAt > 0 && { timeToFirstChunkMs: this.firstContentAt - this.attemptAt }),
      ...(this.firstContentAt > 0 && this.streamEvents > 1 && { timePerOutputChunkMs: (end - this.firstContentAt) / (this.streamEvents - 1) }),
      ...(this.cacheHit && { cacheHit: this.cacheHit }),
      ...(this.context.guardrails?.marks.length ? { guardrails: this.context.guardrails.marks } : {}),
    };
    this.context.reservation?.handOver();
    this.context.upstreamEndpoint = tally.endpoint?.name;
    this.context.upstreamAttempts = tally.count;
    this.context.recorded = true;
    const settling = this.services.usage.record(exchange);
    if (trace?.recording) {
      trace.recorded({
        status,
        outcome: exchange.outcome,
        model: this.model.canonicalId,
        usage,
        costUsd: usage && !this.cacheHit ? this.services.usage.charge(usage, this.model).costUsd : undefined,
        facts: this.facts,
        upstreamStatus: this.upstreamStatus,
        outputText: this.outputText,
        cacheHit: this.cacheHit !== undefined,
        attempts: tally.count,
        settling,
      });
    }
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
