import type { IncomingHttpHeaders } from 'node:http';
import type { LimitRefusal } from '../../core/gateway-errors.ts';
import type { AnswerFacts } from '../../core/formats/index.ts';
import type { SettledFigures, UsageOutcome } from '../../core/exchange.ts';
import type { TokenUsage } from '../../plugins/plugin-contract.ts';

/**
 * What the data plane tells a trace, without knowing OpenTelemetry: it opens one {@link RequestTrace}
 * per model request when tracing is on (and holds none when it is off, so that the hot path only
 * checks for it), and calls the trace at each stage. Nothing here blocks or throws.
 */
export interface RequestTracing {
  /**
   * Decides a model request's sampling: a sampled one gets its server span (its parent the client's `traceparent`,
   * if any), an unsampled one only the `traceparent` its upstream calls carry.
   */
  startRequest(start: RequestStart): RequestTrace | UnsampledTrace;
}

/** What a request's server span is opened with. */
export interface RequestStart {
  readonly headers: IncomingHttpHeaders;
  readonly method: string;
  /** The route's canonical path (`http.route`). */
  readonly route: string;
  /** The path as the client sent it, without its query (`url.path`). */
  readonly path: string;
  /** The gateway's request id (`x-request-id`). */
  readonly requestId: string;
}

/** Attribute values a trace takes: no objects (the conventions' attributes are flat). */
export type TraceAttributes = Record<string, string | number | boolean | readonly string[] | undefined>;

/** The GenAI client span of one upstream attempt, as it opens. */
export interface AttemptStart {
  /** `gen_ai.operation.name`, from the route table. */
  readonly operation: string;
  /** The provider's vendor prefix (`gen_ai.provider.name`). */
  readonly provider: string;
  /** The model as sent to the provider (`gen_ai.request.model`). */
  readonly requestModel: string;
  /** The gateway's canonical model id. */
  readonly model: string;
  /** The endpoint's configured name (or index). */
  readonly endpoint: string;
  /** The endpoint's origin (`server.address` and `server.port` are read from it). */
  readonly origin: string;
  readonly stream: boolean;
  /** The request's sampling parameters, when sent (`gen_ai.request.max_tokens`, `temperature`, `top_p`). */
  readonly maxTokens?: number;
  readonly temperature?: number;
  readonly topP?: number;
  /** The prompt as the conventions' messages (JSON); asked only when message content is captured. */
  readonly inputMessages?: () => { readonly system?: unknown; readonly messages: unknown };
}

/** How an answer ended, as its usage record tells it. */
export interface RecordedAnswer {
  /** The status the client received (499 when it left first). */
  readonly status: number;
  readonly outcome: UsageOutcome;
  /** The canonical model that served (a fallback's, once the request moved on to one). */
  readonly model: string;
  /** The usage the upstream reported, when it did. */
  readonly usage?: TokenUsage;
  /** What the answer cost at the model's prices, when its usage is known. */
  readonly costUsd?: number;
  /** What the answer said of itself (model, id, finish reasons), when read. */
  readonly facts?: AnswerFacts;
  /** The upstream's status of the attempt that answered. */
  readonly upstreamStatus?: number;
  /** The answer's text, asked only when message content is captured. */
  readonly outputText?: () => string;
  /** Served from the response cache: no upstream call. */
  readonly cacheHit?: boolean;
  /** Attempts made and the endpoint that served or failed last. */
  readonly attempts: number;
  /** Resolves once the usage record is stored with estimated figures (a cut stream): the span ends then. */
  readonly settling?: Promise<unknown>;
}

/**
 * An unsampled request's trace: no span and nothing recorded, only the W3C `traceparent` its upstream calls carry
 * (its trace id, flagged 00), so the request costs the sampling decision and that string.
 */
export interface UnsampledTrace {
  readonly recording: false;
  readonly traceparent: string;
}

/** One sampled model request's trace: its server span, and the client span of each upstream attempt. */
export interface RequestTrace {
  readonly recording: true;
  /** Whether prompt and completion text may go on spans (the operator opted in). */
  readonly capturesContent: boolean;
  /** An event on the server span (authentication, limits, the response cache). */
  event(name: string, attributes?: TraceAttributes): void;
  /** Attributes on the server span. */
  set(attributes: TraceAttributes): void;
  /** The gateway answered with its own error (`code`), possibly a limit's refusal. */
  refused(code: string, limit?: LimitRefusal): void;
  /** Opens the client span of the next upstream attempt; a failed one before it is closed as failed over. */
  attempt(start: AttemptStart): AttemptTrace;
  /** A plugin hook failed (`hook` names it; a stream fixup's fault is named as such). */
  pluginFault(plugin: string, hook: string): void;
  /** The request's reservation settled to these figures (none: released). */
  settled(figures: SettledFigures | undefined): void;
  /** The answer ended and was recorded: closes the attempt that served (or failed last). */
  recorded(answer: RecordedAnswer): void;
  /** Ends the server span (after a pending estimate, if any); later calls do nothing. */
  end(status: number): void;
}

/** The client span of one upstream attempt. */
export interface AttemptTrace {
  /** The W3C `traceparent` the upstream is sent: the request's trace, this attempt's span. */
  readonly traceparent: string;
  /** The upstream's response status and headers came. */
  responded(status: number): void;
  /** A stream's first content event came (time to first token). */
  firstContent(): void;
  /**
   * The attempt failed (`reason` in the gateway's words, `status` the upstream's): the span closes as
   * failed over when another attempt follows, as failed when none does.
   */
  failed(reason: string, status?: number): void;
}
