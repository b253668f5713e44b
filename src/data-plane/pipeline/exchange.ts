import type { IncomingHttpHeaders, IncomingMessage } from 'node:http';
import type { Observation } from '../../core/diagnostics.ts';
import type { CallerKey, ExchangeView, ExchangeWatch, UsageOutcome } from '../../core/exchange.ts';
import type { AnswerFacts } from '../../core/formats/index.ts';
import type { LimitRefusal } from '../../core/gateway-errors.ts';
import type { ResolvedModel } from '../../core/model-registry.ts';
import type { ModelRoute } from '../../core/route-table.ts';
import type { TokenUsage } from '../../plugins/plugin-contract.ts';
import type { Reservation } from '../../usage/reservation.ts';
import type { ClientResponse, ClientRead } from '../http/client-connection.ts';
import type { JsonRequestBody } from '../http/json-body.ts';
import {
  newTally,
  type AttemptTally,
  type ClientWatch,
  type EndpointPool,
  type PooledEndpoint,
} from '../upstream/endpoint-pool.ts';
import type { AnswerCapture } from '../cache/response-caching.ts';
import type { GuardrailRun } from '../guardrails/guardrail-run.ts';
import type { CompatibleAnswer, CompatibleFailure } from '../routes/compatible-answer.ts';
import type { CompatibleCall } from '../upstream/upstream-client.ts';
import type { ChatCall } from '../routes/chat-call.ts';
import type { StreamedText } from '../sse/sse-relay.ts';

/** What the attempts came to, for the relay: an endpoint's answer, or the last endpoint's own error as it came. */
export type AttemptedAnswer =
  | {
      readonly kind: 'answer';
      readonly answer: CompatibleAnswer;
      readonly endpoint: PooledEndpoint;
      readonly pool: EndpointPool;
    }
  | { readonly kind: 'upstream-error'; readonly answer: Extract<CompatibleFailure, { kind: 'json' }> };

/** How an exchange ended, as its usage record tells it: set once, by the stage that ended it. */
export interface Ending {
  /** The status the client received (499 when it left first). */
  readonly status: number;
  /** The usage the upstream reported, if it did. */
  readonly usage: TokenUsage | undefined;
  /** Whether the upstream consumed tokens, so that missing usage must be estimated. */
  readonly consumed: boolean;
  readonly outcome: UsageOutcome;
}

/** The upstream side of an exchange, written by the attempt stage as its attempts run. */
export class UpstreamTimes {
  readonly tally: AttemptTally = newTally();
  /** When the first attempt started and the answer's body was read (0: not yet). */
  startedAt = 0;
  doneAt = 0;
  /** Time spent in attempts, when the route sums them (waits between retries left out); else from `startedAt`. */
  spentMs: number | undefined;
  /** When the latest attempt started, and when its stream's first content event came (0: none). */
  attemptAt = 0;
  firstContentAt = 0;
  /** The upstream's status of the answer relayed. */
  status: number | undefined;
}

/**
 * One model request, owned by its route's pipeline: made at the way in, then each of its facts set by
 * the stage that owns it (the caller by `authenticate`, the body by `readBody` and, when a guardrail
 * rewrote it, `guardRequest`, the model by `resolve`, the reservation by `reserve`, the upstream times by
 * `attempt`, the ending by the stage that ended the exchange), and read by the later stages, the usage
 * record and the subscribers of the gateway's events.
 */
export class Exchange implements ExchangeView, Observation {
  readonly startedAt = performance.now();
  readonly method: string;
  readonly headers: IncomingHttpHeaders;
  readonly watch: ExchangeWatch = { answer: false, content: false, events: false, traceparent: undefined };

  // Observation: what the access log learns of a request that ends without a usage record.
  label = 'unmatched';
  errorCode: string | undefined = undefined;
  refusedBy: LimitRefusal | undefined = undefined;
  /** Set by the record stage once the usage record was handed over. */
  recorded = false;

  /** `authenticate`: the caller (undefined on open routes, tests only). */
  caller: CallerKey | undefined = undefined;
  /** `resolve`: the end user the request names; undefined when it names none. */
  endUser: string | undefined = undefined;
  /** The body when a WebSocket message brought it (`readBody` reads it instead of the request's). */
  declare readonly message?: Buffer;
  /** `readBody` (and `guardRequest`, when a guardrail rewrote a text): the body as forwarded. */
  body: JsonRequestBody | undefined = undefined;
  /** `resolve`: the model asked for, and the one serving (a fallback's, or a cached answer's, once it moves on). */
  requested: ResolvedModel | undefined = undefined;
  model: ResolvedModel | undefined = undefined;
  /** `resolve`: the endpoints of the requested model's provider. */
  pool: EndpointPool | undefined = undefined;
  /** `resolve`: the call forwarded upstream on a compatible route (its bytes spliced when first read). */
  call: CompatibleCall | undefined = undefined;
  /** `guardRequest`: the guardrails the request runs under, and what they did; none when it gets none. */
  guardrails: GuardrailRun | undefined = undefined;
  /** `cache`: set when the response cache answered (what the answer would have cost). */
  cacheHit: { readonly savedUsd: number } | undefined = undefined;
  /** `cache`: collects the bytes the client gets, to store them once the answer is whole. */
  capture: AnswerCapture | undefined = undefined;
  /** `reserve`: what the request holds on its token and money limits. */
  reservation: Reservation | undefined = undefined;
  /** `attempt`: the upstream's side, as its attempts ran; the client's leaving pulls its attempts' switch. */
  readonly upstream = new UpstreamTimes();
  client: ClientWatch | undefined = undefined;
  /** `attempt`: the endpoint's answer, for the relay. */
  answer: AttemptedAnswer | undefined = undefined;
  /** `attempt` of the native chat: the adapter's call and the upstream's 2xx body, for the answer stage. */
  chat: { readonly call: ChatCall; readonly body: Buffer; readonly apiKey: string | undefined } | undefined = undefined;
  /** `relay`: a stream's text, kept for an estimate should its usage be missing. */
  streamed: StreamedText | undefined = undefined;
  /** The body its usage estimate reads, when not the client's (the native route's upstream body). */
  estimateBody: (() => Record<string, unknown>) | undefined = undefined;
  /** `relay`: when the status went out (0: not yet), and the events of a stream relayed. */
  firstByteAt = 0;
  streamEvents = 0;
  /** `relay`: what the answer said of itself and its text, when a subscriber asked (`watch`). */
  facts: AnswerFacts | undefined = undefined;
  outputText: (() => string) | undefined = undefined;
  /** How the exchange ended, set once by the stage that ended it; the record stage records it. */
  ending: Ending | undefined = undefined;

  constructor(
    /** The gateway the request runs in (its events' source). */
    readonly source: object,
    readonly route: ModelRoute,
    readonly requestId: string,
    readonly req: IncomingMessage,
    /** Where the answer goes: the HTTP response, or a response's messages on a WebSocket. */
    readonly res: ClientResponse,
    /** The path as the client sent it, without its query. */
    readonly path: string,
  ) {
    this.method = req.method ?? '';
    this.headers = req.headers;
  }

  /** The caller's key id, for the access log of a request answered without a usage record. */
  get keyId(): string | undefined {
    return this.caller?.id;
  }

  get upstreamStatus(): number | undefined {
    return this.upstream.status;
  }

  /** Ends the exchange with an answer (the usage record is taken once the pipeline unwinds). */
  end(
    status: number,
    usage: TokenUsage | undefined,
    consumed: boolean,
    outcome: UsageOutcome = status === 499 ? 'client_closed' : 'complete',
  ): void {
    this.ending ??= { status, usage, consumed, outcome };
  }

  /**
   * Ends the exchange as the client took its answer: a client that left is a 499, one that stopped
   * reading is `client_stalled` (the status it was sent is kept).
   */
  endAsRead(
    read: ClientRead,
    status: number,
    usage: TokenUsage | undefined,
    consumed: boolean,
    outcome?: UsageOutcome,
  ): void {
    if (read === 'taken') this.end(status, usage, consumed, outcome);
    else if (read === 'closed') this.end(499, usage, consumed);
    else this.end(status, usage, consumed, 'client_stalled');
  }

  /** Ends the exchange with the gateway's error and gives the error back, for the caller to throw. */
  fail<E extends { readonly status: number }>(
    error: E,
    consumed = false,
    usage?: TokenUsage,
    outcome?: UsageOutcome,
  ): E {
    this.end(error.status, usage, consumed, outcome);
    return error;
  }
}

/** What follows a stage in its route's list: the rest of the pipeline over the same exchange. */
export type Next = (exchange: Exchange) => Promise<void>;

/**
 * One step of a model request over its {@link Exchange}: it does its part, runs `next` (or answers
 * without it), and cleans up what it holds in `finally`. A stage is made by a named factory that takes
 * only what the stage uses, and it imports no other stage.
 */
export type Stage = (exchange: Exchange, next: Next) => Promise<void>;

const DONE: Next = () => Promise.resolve();

/**
 * A route's stages as one function, each stage's `next` bound once here (no closure per request). A stage
 * that is off for the route or the configuration is simply not in the list: it costs nothing.
 */
export function pipeline(stages: readonly Stage[]): Next {
  let next = DONE;
  for (let index = stages.length - 1; index >= 0; index--) {
    const stage = stages[index]!;
    const after = next;
    next = (exchange) => stage(exchange, after);
  }
  return next;
}

/** The names of a list's stages, in order (the diagram of `docs/design.md` is checked against them). */
export function stageNames(stages: readonly Stage[]): string[] {
  return stages.map((stage) => stage.name);
}
