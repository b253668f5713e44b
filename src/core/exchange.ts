import type { RouteId, TokenUsage, UpstreamRouteId, UsageExtractor, WireFormat } from '../plugins/plugin-contract.ts';
import type { IncomingHttpHeaders } from 'node:http';
import type { ResolvedModel } from './model-registry.ts';
import type { ModelRoute } from './route-table.ts';
import type { AnswerFacts } from './formats/index.ts';
import type {
  CacheSetting,
  CallerGroup,
  EndUserLimits,
  EndUserSetting,
  AlertSetting,
  GuardrailSetting,
  Limits,
  MoneyBudget,
  TeamRecord,
  TokenQuota,
} from './limits.ts';

/** The caller as the auth middleware leaves it in `res.locals.apiKey` (never the key itself). */
export interface CallerKey {
  readonly id: string;
  /** Canonical model IDs the key may use; every model when absent. */
  readonly models?: readonly string[];
  /** Charged-token quotas of the key, per UTC day and per UTC month. */
  readonly quota?: TokenQuota;
  /** Money budgets of the key, per UTC day and per UTC month. */
  readonly budget?: MoneyBudget;
  /** The key's own request limit per window, instead of the gateway's. */
  readonly rpm?: number;
  /** Tokens per UTC minute. */
  readonly tpm?: number;
  /**
   * The key's team: its id (what its shared counters and cache entries are kept under), its name, the limits it shares
   * with the team's other keys, its cache setting and the name of its budget group (as read from the team store).
   */
  readonly team?: Pick<TeamRecord, 'id' | 'name' | 'group'> &
    Limits &
    CacheSetting &
    GuardrailSetting &
    EndUserSetting &
    AlertSetting;
  /**
   * The budget group the request draws from: the key's, else its team's (as read from the group store), with
   * its id (what its counters are kept under), name and limits.
   */
  readonly group?: CallerGroup;
  /** The key's own limit of requests in flight at once, instead of the gateway's. */
  readonly concurrency?: number;
  /** `false`: the key's requests bypass the response cache (so do they when `team.cache` is `false`). */
  readonly cache?: boolean;
  /** The guardrails the key's requests get (over its team's); absent: its team's, else every configured one. */
  readonly guardrails?: readonly string[];
  /** The limits each end user of the key gets separately. */
  readonly end_user?: EndUserLimits;
  /** The key's alert thresholds (percents of its budgets and quotas); absent: the gateway's. */
  readonly alerts?: readonly number[];
}

/** What a guardrail did to an exchange, as its usage record keeps it (never what it found). */
export interface GuardrailMark {
  /** The guardrail's configured name. */
  readonly name: string;
  readonly phase: 'request' | 'response';
  /** `block`: refused; `redact`: rewrote text (a webhook's rewrite included). */
  readonly action: 'block' | 'redact';
}

/** What one request to an upstream came to, handed to usage accounting when the response is done. */
export interface ExchangeRecord {
  readonly keyId: string | undefined;
  /** The end user the request named (see `core/incoming-request.ts`); absent when it named none. */
  readonly endUser?: string;
  readonly route: RouteId;
  readonly resolved: ResolvedModel;
  /** The status the client received (499 when the client went away first). */
  readonly status: number;
  readonly stream: boolean;
  readonly latencyMs: number;
  /** The request's id (`x-request-id`, accepted from the client or generated). */
  readonly requestId?: string;
  /** Of `latencyMs`, the time spent waiting on the upstream (every attempt, the answer's body included). */
  readonly upstreamMs?: number;
  /** When the answer's status and headers went out, in ms after the start; undefined when the error path answered. */
  readonly firstByteMs?: number;
  /** The usage the upstream reported; `undefined` when it reported none. */
  readonly usage: TokenUsage | undefined;
  /** Whether tokens were consumed upstream, so that missing usage must be estimated (false for upstream errors). */
  readonly consumed: boolean;
  /**
   * Earlier attempts the upstream had the request of but whose usage was never read (timeouts, answers
   * that broke off, failover): each is charged the request's input estimate on top of the record's usage.
   */
  readonly unreportedAttempts?: number;
  /** How the answer ended: whole, cut by the upstream, or left by the client. */
  readonly outcome: UsageOutcome;
  /** The endpoint that served or failed last (its configured name or index), when one was tried. */
  readonly endpoint?: string;
  /** Upstream attempts made, failed-over ones included. */
  readonly attempts?: number;
  /**
   * The request body (parsed on call: only estimates need it, so a stream does not hold the parsed body
   * while it runs) and the text streamed back so far (or a leading sample of it), for estimates.
   */
  readonly requestBody: () => Record<string, unknown>;
  readonly responseText: () => string | TextSample;
  /** What the request reserved on its token and money limits, settled to the usage its record stores. */
  readonly settlement?: Settlement;
  /** What guardrails blocked or redacted in the exchange, in the order they acted. */
  readonly guardrails?: readonly GuardrailMark[];
  /** Streams: from the start of the attempt that served to its first content event, in ms. */
  readonly timeToFirstChunkMs?: number;
  /** Streams: the mean time between the events after the first content, in ms (two or more events). */
  readonly timePerOutputChunkMs?: number;
  /**
   * Set when the response cache answered: `usage` holds the stored answer's counts, which cost nothing
   * now; `savedUsd` is what the answer cost when it was fetched (at today's prices).
   */
  readonly cacheHit?: { readonly savedUsd: number };
}

/** The figures of a usage record a reservation settles to (a usage record has them all). */
export interface SettledFigures {
  /** Input + output tokens (tokens per minute). */
  readonly totalTokens: number;
  /** Charged tokens (quotas). */
  readonly chargedTokens: number;
  /** USD (money budgets). */
  readonly costUsd: number;
}

/** A request's reservation on its limits, ended once with the figures recorded (none: released). */
export interface Settlement {
  settle(figures: SettledFigures | undefined): void;
}

/** The usage a record stores once its estimate is made. */
export interface RecordedUsage {
  readonly usage: TokenUsage | undefined;
  /** Whether any of the figures is a tokenizer estimate. */
  readonly estimated: boolean;
}

/** The usage accounting the routes call; the usage module implements it. */
export interface UsageAccounting {
  /** The extractor for answers of this format on this route and model (a plugin's own, or the standard one). */
  extractor(format: WireFormat, route: UpstreamRouteId, resolved: ResolvedModel): UsageExtractor;
  /** Text deltas of one streamed event (for estimates when a stream ends without usage). */
  streamedText(format: WireFormat, data: string): string;
  /** The derived counters of a usage under the model's pricing (the native chat result shows them). */
  charge(
    usage: TokenUsage,
    resolved: ResolvedModel,
  ): { readonly totalTokens: number; readonly chargedTokens: number; readonly costUsd: number };
  /**
   * Records one exchange. Never throws, never delays the response. Gives back undefined when the record
   * was taken as it is (the usual case), or, when its usage must first be estimated with a tokenizer,
   * a promise of the usage the record stores (it never rejects).
   */
  record(exchange: ExchangeRecord): Promise<RecordedUsage> | undefined;
}

/**
 * How an answer ended, as its usage record tells it:
 * - `complete`: the answer was delivered whole (a stream reached its format's terminal event,
 *   `WIRE_FORMATS[format].isTerminalEvent`);
 * - `upstream_cut`: the upstream's answer ended before its terminal event (connection dropped, body
 *   broke off, or an event the gateway refused to relay ended the stream);
 * - `client_closed`: the client went away before the end;
 * - `client_stalled`: the client stopped reading (its connection's buffers stayed full for the client
 *   write timeout); the gateway ended the answer and dropped the upstream;
 * - `stalled`: a stream ended because the upstream stopped sending;
 * - `plugin_error`: a plugin's hook failed;
 * - `guardrail_blocked`: a guardrail refused the request or the answer (a stream ends early, in band).
 */
export type UsageOutcome =
  'complete' | 'upstream_cut' | 'client_closed' | 'client_stalled' | 'stalled' | 'plugin_error' | 'guardrail_blocked';

/** What a stream delivered, for its estimate: its text, or a leading sample of it, and its full length. */
export interface TextSample {
  readonly text: string;
  /** Characters of the whole text (at least `text.length`). */
  readonly chars: number;
}

/** What a subscriber asks to see of an exchange, set while its `exchange:start` event is published. */
export interface ExchangeWatch {
  /** What the answer says of itself (model, id, finish reasons): read from the answer only when asked. */
  answer: boolean;
  /** The prompt and the answer's text (traces that capture message content). */
  content: boolean;
  /** Its events on the `watched` channels too (see `ExchangeEvent`): a sampled trace follows its exchange there. */
  events: boolean;
  /**
   * The W3C trace context its upstream calls carry when no `attempt:start` subscriber gives an attempt one of its
   * own (an unsampled trace: its trace id, flagged 00).
   */
  traceparent: string | undefined;
}

/** One model request as its events show it to subscribers: read only, apart from {@link watch}. */
export interface ExchangeView {
  /** The gateway it runs in (see `EventSource`). */
  readonly source: object;
  readonly route: ModelRoute;
  /** The id stamped at the way in (the client's `x-request-id` when acceptable, else a fresh one). */
  readonly requestId: string;
  /** `performance.now()` when the request reached the way in. */
  readonly startedAt: number;
  readonly method: string;
  /** The path as the client sent it, without its query. */
  readonly path: string;
  readonly headers: IncomingHttpHeaders;
  /** The authenticated caller, once known. */
  readonly caller: CallerKey | undefined;
  /** The end user the request named, once its body is read; undefined when it named none. */
  readonly endUser: string | undefined;
  readonly watch: ExchangeWatch;
  /** What the answer said of itself, when `watch.answer` asked for it. */
  readonly facts: AnswerFacts | undefined;
  /** The answer's text, when `watch.content` asked for it. */
  readonly outputText: (() => string) | undefined;
  /** The upstream's status of the answer relayed. */
  readonly upstreamStatus: number | undefined;
}
