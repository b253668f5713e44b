import { channel, type Channel } from 'node:diagnostics_channel';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { LimitRefusal } from './gateway-errors.ts';
import type { ExchangeRecord, ExchangeView, RecordedUsage, SettledFigures } from './exchange.ts';
import type { GuardrailPhase, RouteId } from '../plugins/plugin-contract.ts';
import type { Actor } from './access.ts';
import type { LimitPeriod, LimitScope, Meter } from './limits.ts';

/**
 * The gateway's events, declared once on `node:diagnostics_channel` (as undici's `lib/core/diagnostics.js`
 * does). The request path publishes each only while someone subscribes (`hasSubscribers`), so an event
 * nobody listens to costs one property read; the access log, metrics, traces and the guardrail action
 * log subscribe from outside the request path (`src/ops/`), and a new observer is one more subscriber.
 */

/** Any request the way in takes, on either plane: a subscriber may watch its response (the access log). */
export interface HttpRequestMessage {
  readonly source: EventSource;
  readonly req: IncomingMessage;
  readonly res: ServerResponse;
  /** What the plane that answers fills in for the access log (see `Observation`). */
  readonly observation: Observation;
}

/**
 * What the access log and metrics learn of a request answered without a usage record, filled in by the plane answering
 * it.
 */
export interface Observation {
  /** The `route` label: a model route's label, an Express route's pattern, or `unmatched` (never the raw path). */
  label: string;
  /** Read at the end instead of {@link label} when set (Express knows its matched route only once it ran). */
  labelOf?: () => string;
  keyId?: string;
  keyIdOf?: () => string | undefined;
  /** The gateway error answered, if any (the rate-limit metric tells quotas from request limits by it). */
  errorCode?: string;
  /** The limit that refused the request, for the refusals metric. */
  refusedBy?: LimitRefusal;
  /** Its route handed a usage record over, which the `exchange:recorded` event told already. */
  recorded: boolean;
}

/** What one upstream attempt opens with, for its span: the route's operation, the endpoint, the request's sampling. */
export interface AttemptStartMessage {
  readonly exchange: ExchangeView;
  /** `gen_ai.operation.name`, from the route table. */
  readonly operation: string;
  readonly provider: string;
  /** The model as sent to the provider (`gen_ai.request.model`). */
  readonly requestModel: string;
  /** The gateway's canonical model id. */
  readonly model: string;
  /** The endpoint's configured name (or index), and its origin. */
  readonly endpoint: string;
  readonly origin: string;
  readonly stream: boolean;
  readonly maxTokens?: number;
  readonly temperature?: number;
  readonly topP?: number;
  /** The prompt as the GenAI conventions' messages; present only when a subscriber asked for content. */
  readonly inputMessages?: () => { readonly system?: unknown; readonly messages: unknown };
  /** Set by a subscriber: the W3C `traceparent` the upstream is sent for this attempt. */
  traceparent?: string;
}

/** An endpoint's failure that counts against it (the failover warning): never a URL, a key or the upstream's words. */
export interface EndpointFailedMessage {
  readonly exchange: ExchangeView;
  readonly provider: string;
  /** The endpoint's configured name (or index). */
  readonly endpoint: string;
  /** The upstream's retryable status; absent when the transport or the stream failed. */
  readonly status?: number;
  /** The reason for a failure without a status (`failed: connection refused`, `did not answer in time`). */
  readonly reason?: string;
}

/** How one call to an upstream origin ended, for the upstream metrics. */
export interface UpstreamCallMessage {
  readonly source: EventSource;
  readonly provider: string;
  /** The endpoint's origin. */
  readonly origin: string;
  readonly outcome: 'ok' | 'error_status' | 'transport_error' | 'timeout' | 'aborted';
}

/** One thing a guardrail did, for the metric, the log and the action log (never what it found). */
export interface GuardrailActed {
  readonly guardrail: string;
  readonly phase: GuardrailPhase;
  /** `fail_open`: a webhook that did not answer let the text pass unchecked. */
  readonly action: 'block' | 'redact' | 'fail_open';
  /** Why: a finding, a webhook's verdict, or a webhook that did not answer (`detail` says how). */
  readonly cause: 'finding' | 'webhook' | 'unavailable';
  readonly detail?: string;
  readonly route: RouteId;
  readonly model: string;
  readonly requestId?: string;
  readonly keyId?: string;
  /** The team of the caller's key, when it has one. */
  readonly team?: string;
}

/** A plugin hook threw or returned a wrong shape. */
export interface PluginFaultMessage {
  readonly plugin: string;
  readonly hook: string;
  readonly cause: unknown;
  readonly route: string;
  readonly model: string;
  readonly requestId?: string;
  readonly exchange: ExchangeView;
}

/** A model request's exchange once its usage record was handed to usage accounting. */
export interface ExchangeRecordedMessage {
  readonly exchange: ExchangeView;
  readonly record: ExchangeRecord;
  /** What the record stores once an estimate is made (a cut stream); absent when it was taken as it came. */
  readonly recorded?: Promise<RecordedUsage>;
  /** What the answer cost at the serving model's prices (undefined for a cache hit or without usage). */
  readonly costUsd: () => number | undefined;
}

/** A reservation settled (see `EVENTS.settled`). */
export interface SettledMessage {
  readonly exchange: ExchangeView;
  readonly figures: SettledFigures | undefined;
  /** The meters reserved on (the reservation's, in its windows). */
  readonly meters: readonly Meter[];
}

/** A model request's end: the status it was answered with and the gateway's error, if it answered one. */
export interface ExchangeEndMessage {
  readonly exchange: ExchangeView;
  readonly status: number;
  readonly errorCode?: string;
  readonly limit?: LimitRefusal;
}

/** A WebSocket on a model route, as its events tell it: never its key, its messages or what they answered. */
export interface WebSocketView {
  readonly source: EventSource;
  /** The id of the request that opened it (`x-request-id`); each response on it has its own. */
  readonly requestId: string;
  readonly route: RouteId;
  /** The caller's key id, as authenticated when it opened. */
  readonly keyId: string | undefined;
  /** `performance.now()` when it opened. */
  readonly openedAt: number;
}

/** One message a client sent on a WebSocket, once it was answered (a response: once it ended). */
export interface WebSocketMessage {
  readonly source: EventSource;
  readonly socket: WebSocketView;
  /** `response.create`, `response.cancel`, or `invalid` (not JSON, or a type the socket does not take). */
  readonly type: 'response.create' | 'response.cancel' | 'invalid';
  /** The status the answer had (an error event's status, or the response's). */
  readonly status: number;
  /** The gateway's error, if it answered one. */
  readonly errorCode?: string;
  readonly limit?: LimitRefusal;
  /** The id of the response it started; its exchange's usage record, if any, is told as `exchange:recorded`. */
  readonly requestId?: string;
  /** A usage record was handed over for it (the access log has its line from that). */
  readonly recorded: boolean;
  /** Messages sent back for it: the response's events, an error, the acknowledgement of a cancel. */
  readonly sent: number;
  readonly durationMs: number;
}

/** A WebSocket closed: the close code (1006 when the connection ended without one) and what went over it. */
export interface WebSocketClosed {
  readonly source: EventSource;
  readonly socket: WebSocketView;
  readonly code: number;
  /** Messages the client sent, and responses started. */
  readonly messages: number;
  readonly responses: number;
}

/** A limit alert fired: an owner's money budget or token quota reached one of its thresholds in a window. */
export interface LimitAlert {
  readonly source: EventSource;
  /** This firing's id (`alrt_…`), the webhook's `id`. */
  readonly id: string;
  readonly scope: LimitScope;
  /** The key id or the team name (as the meter names it). */
  readonly owner: string;
  /** The team the owner is or belongs to, when it has one (who may read the alert). */
  readonly team: string | null;
  readonly kind: 'quota' | 'budget';
  readonly period: Exclude<LimitPeriod, 'minute'>;
  /** The percent reached. */
  readonly threshold: number;
  /** Use (reservations of requests in flight included) and the limit, in {@link unit}. */
  readonly used: number;
  readonly limit: number;
  readonly unit: 'usd' | 'tokens';
  /** When the window ends and when it fired (epoch ms). */
  readonly windowEnd: number;
  readonly firedAt: number;
}

/** What a control-plane event is about. */
export interface EventTarget {
  readonly type: 'key' | 'team' | 'group' | 'token' | 'cache' | 'config' | 'session' | 'route' | 'limit';
  /**
   * The key's or token's id, the team's or group's name, a cache tenant, a route (`POST /admin/keys`), a config
   * version, a limit (`<scope>:<owner>:<kind>:<period>`).
   */
  readonly id?: string;
  /** The team the target belongs to, when it belongs to one (what team-scoped readers of the log see). */
  readonly team?: string | null;
}

/** Where a control-plane event comes from. */
export interface ChangeSite {
  /** The gateway (or CLI run) that published it (see {@link EventSource}). */
  readonly source: EventSource;
  /** The door it came through. */
  readonly via: 'admin' | 'account' | 'cli' | 'config';
  /** The client address (behind trusted proxies, the client they name); absent for the CLI and reloads. */
  readonly address?: string;
}

/** A control-plane event: where it comes from, and when it happened. */
export interface ControlPlaneEvent extends ChangeSite {
  /** When it happened, in milliseconds since the epoch: the time its audit record carries wherever it goes. */
  readonly at: number;
}

/** A change made on the control plane: keys, teams, service tokens, cache clears, configuration reloads. */
export interface ControlPlaneChange extends ControlPlaneEvent {
  readonly actor: Actor;
  /**
   * `key.create`, `key.update`, `key.revoke`, `team.create`, `team.update`, `team.delete`, `group.create`,
   * `group.update`, `group.delete`, `token.create`, `token.revoke`, `cache.clear`, `config.reload`, `limit.alert`.
   */
  readonly action: string;
  readonly target: EventTarget;
  /** The target before and after, as the admin API shows it: never a secret or its hash's input. */
  readonly before: unknown;
  readonly after: unknown;
}

/** A control-plane request refused: no or a wrong credential (401), or a role that may not do it (403). */
export interface ControlPlaneRefusal extends ControlPlaneEvent {
  /** Absent when no one could be told (401). */
  readonly actor?: Actor;
  /** What was tried: the permission, or `sign-in`. */
  readonly action: string;
  readonly target: EventTarget;
  readonly status: 401 | 403;
  readonly reason: string;
}

/** A sign-in to the account page, or a sign-out. */
export interface SignInEvent extends ControlPlaneEvent {
  readonly actor: Actor;
  readonly action: 'session.sign-in' | 'session.sign-out';
  readonly method: 'oidc' | 'admin-token';
}

/**
 * One event: its channel on `node:diagnostics_channel` with the message type the compiler checks on both
 * sides. Publishers ask {@link GatewayEvent.active} first, so that no message is built for nobody.
 */
export class GatewayEvent<Message> {
  readonly channel: Channel;

  constructor(readonly name: string) {
    this.channel = channel(name);
  }

  /** Whether anyone subscribes now. */
  get active(): boolean {
    return this.channel.hasSubscribers;
  }

  publish(message: Message): void {
    this.channel.publish(message);
  }

  /**
   * Subscribes `listener` to the messages of one gateway (`source`: several gateways share a process in
   * tests and benchmarks, while channels are the process's); gives back the call that unsubscribes it.
   */
  subscribe(source: EventSource, listener: (message: Message) => void): () => void {
    return subscribeTo(this.channel, source, listener);
  }
}

/**
 * An event about one exchange. Besides its channel of every exchange's messages it has a second one,
 * `<name>:watched`, carrying only the messages of exchanges a subscriber of `exchange:start` asked to follow
 * (`exchange.watch.events`): traces follow their sampled exchanges there, so that an unsampled exchange
 * builds no message for them.
 */
export class ExchangeEvent<Message> extends GatewayEvent<Message> {
  readonly watched: Channel;

  constructor(
    name: string,
    private readonly exchangeOf: (message: Message) => ExchangeView,
  ) {
    super(name);
    this.watched = channel(`${name}:watched`);
  }

  /** Whether a message about `exchange` would reach anyone now. */
  activeFor(exchange: ExchangeView): boolean {
    return this.channel.hasSubscribers || (exchange.watch.events && this.watched.hasSubscribers);
  }

  override publish(message: Message): void {
    this.channel.publish(message);
    if (this.watched.hasSubscribers && this.exchangeOf(message).watch.events) this.watched.publish(message);
  }

  /** Subscribes `listener` to the messages of the exchanges followed (`watch.events`) in one gateway. */
  subscribeWatched(source: EventSource, listener: (message: Message) => void): () => void {
    return subscribeTo(this.watched, source, listener);
  }
}

function subscribeTo<Message>(
  on: Channel,
  source: EventSource,
  listener: (message: Message) => void,
): () => void {
  const onMessage = (message: unknown) => {
    if (sourceOf(message) === source) listener(message as Message);
  };
  on.subscribe(onMessage);
  return () => void on.unsubscribe(onMessage);
}

/**
 * Whose events a message is: every message carries its gateway's `source`, or is about an exchange that
 * does. A gateway makes one at start and hands it to whatever publishes.
 */
export type EventSource = object;

const sourceOf = (message: unknown): unknown => {
  const { source, exchange } = message as { source?: unknown; exchange?: { source?: unknown } };
  return source ?? exchange?.source;
};

const event = <Message>(name: string) => new GatewayEvent<Message>(`model-gateway:${name}`);
/** An event whose message is about an exchange (`message.exchange`). */
const about = <Message extends { readonly exchange: ExchangeView }>(name: string) =>
  new ExchangeEvent<Message>(`model-gateway:${name}`, (message) => message.exchange);
/** An event whose message is the exchange itself. */
const of = (name: string) => new ExchangeEvent<ExchangeView>(`model-gateway:${name}`, (exchange) => exchange);

/** The events, by name. */
export const EVENTS = {
  /** Any request the way in takes (either plane). */
  request: event<HttpRequestMessage>('request'),
  /** A model request's exchange is opened (subscribers may ask, on `exchange.watch`, for answer facts and content). */
  exchangeStart: event<ExchangeView>('exchange:start'),
  /** The caller is known. */
  authenticated: of('exchange:authenticated'),
  /** The request reserved on its token and money limits (meters named `scope:kind:period`). */
  reserved: about<{ readonly exchange: ExchangeView; readonly meters: readonly string[] }>('exchange:reserved'),
  /** The response cache took part: `hit`, `miss` or `bypass`. */
  cache: about<{ readonly exchange: ExchangeView; readonly result: 'hit' | 'miss' | 'bypass' }>('exchange:cache'),
  attemptStart: about<AttemptStartMessage>('attempt:start'),
  /** The upstream's status and headers came. */
  attemptHeaders: about<{ readonly exchange: ExchangeView; readonly status: number }>('attempt:headers'),
  /** A stream's first content event came (time to first token). */
  attemptFirstContent: about<{ readonly exchange: ExchangeView }>('attempt:first-content'),
  /** An attempt failed (`reason` in the gateway's words; `status` the upstream's): another may follow. */
  attemptError: about<{ readonly exchange: ExchangeView; readonly reason: string; readonly status?: number }>(
    'attempt:error',
  ),
  /** An endpoint failed in a way that counts against it (the failover warning). */
  endpointFailed: about<EndpointFailedMessage>('endpoint:failed'),
  /** One upstream call ended (every route, the conformance checks included). */
  upstreamCall: event<UpstreamCallMessage>('upstream:call'),
  guardrail: about<{ readonly exchange: ExchangeView; readonly acted: GuardrailActed }>('guardrail'),
  pluginFault: about<PluginFaultMessage>('plugin-fault'),
  /** A streamed answer starts and stops being relayed (the open-streams gauge). */
  streamOpened: of('stream:opened'),
  streamClosed: of('stream:closed'),
  /**
   * The request's reservation settled to the figures its usage record holds (none: released), on the meters
   * it had reserved on.
   */
  settled: about<SettledMessage>('exchange:settled'),
  exchangeRecorded: about<ExchangeRecordedMessage>('exchange:recorded'),
  exchangeEnd: about<ExchangeEndMessage>('exchange:end'),
  /** A WebSocket opened on a model route, a message on it was answered, it closed. */
  webSocketOpen: event<WebSocketView>('websocket:open'),
  webSocketMessage: event<WebSocketMessage>('websocket:message'),
  webSocketClose: event<WebSocketClosed>('websocket:close'),
  /** A limit alert's threshold was reached (once per threshold, window and meter across instances). */
  limitAlert: event<LimitAlert>('limit:alert'),
  /** Changes of keys, teams, tokens, the cache and the configuration. */
  controlPlaneChange: event<ControlPlaneChange>('control-plane:change'),
  /** Refused control-plane requests and sign-ins. */
  controlPlaneRefusal: event<ControlPlaneRefusal>('control-plane:refusal'),
  /** Sign-ins and sign-outs of the account page. */
  signIn: event<SignInEvent>('control-plane:sign-in'),
} as const;

/** Publishes the message `make` builds, only when someone listens. */
export function publish<Message>(event: GatewayEvent<Message>, make: () => Message): void {
  if (event.active) event.publish(make());
}
