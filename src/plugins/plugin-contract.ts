/**
 * The provider plugin contract.
 *
 * A provider plugin is one typed declaration, made with {@link definePlugin}, that tells the
 * gateway everything it needs about one upstream vendor: its models, its latest alias, the
 * upstream path, wire format and auth style of each route it serves, and the stream fixups it
 * needs. The core never names a vendor or a model: it only reads these declarations.
 *
 * A plugin lives in `<plugins dir>/<vendor>/index.ts` (or compiled `index.js`), default export, and
 * is enabled by listing its vendor in that directory's `manifest.json`: `providers/` in the
 * repository, or any directory named in `GATEWAY_PLUGIN_PATH`. The loader checks every plugin whole
 * at start-up and refuses to start with the plugin's name, its directory and the bad field when
 * something does not fit. `docs/plugins.md` is the guide.
 *
 * @example
 * ```ts
 * import { definePlugin } from 'model-gateway/plugin';
 *
 * export default definePlugin({
 *   contract: 1,
 *   vendor: 'acme',
 *   routes: {
 *     'chat-completions': { path: '/chat/completions', format: 'chat-completions', auth: 'bearer' },
 *   },
 *   models: [
 *     { id: 'acme-1', listed: true, routes: ['chat-completions'],
 *       pricing: { input: 1, cachedInput: 0.1, output: 4 } },
 *   ],
 * });
 * ```
 */

/**
 * The contract versions this gateway loads. A plugin states the one it is written for in
 * {@link ProviderPlugin.contract}; a change that would break existing plugins adds a new version.
 */
export const SUPPORTED_CONTRACT_VERSIONS = [1] as const;

/** A contract version this gateway loads. */
export type ContractVersion = (typeof SUPPORTED_CONTRACT_VERSIONS)[number];

/** A client-facing model route of the gateway. `chat` is the native text route `POST /v1/chat`. */
export type RouteId = 'chat' | 'chat-completions' | 'messages' | 'count-tokens' | 'responses';

/** The routes that forward to an upstream route of the same kind (every route but native chat). */
export type UpstreamRouteId = Exclude<RouteId, 'chat'>;

/** The wire format an upstream route speaks. */
export type WireFormat = 'chat-completions' | 'responses' | 'messages' | 'count-tokens';

/**
 * How the gateway presents its upstream credential: always the key configured for the endpoint the
 * request goes to (`<PREFIX>_API_KEY` or the config file), so reloads, several endpoints and redaction
 * work alike whatever the place. Only the declared credential goes upstream. An endpoint of the config
 * file may name its own place (`providers.<vendor>.endpoints[].auth`, the same forms), which then
 * replaces the route's for every request to that endpoint.
 * - `bearer`: `Authorization: Bearer <key>` (Chat Completions-style upstreams).
 * - `x-api-key`: `x-api-key: <key>` (Messages-style upstreams).
 * - `{ header: 'x-acme-key' }`: the key in that header (lower case name), after `prefix` when given
 *   (e.g. `{ header: 'authorization', prefix: 'Token ' }`).
 * - `{ query: 'key' }`: the key as a query parameter of the upstream URL, `?key=<key>` (percent-encoded).
 */
export type AuthStyle = 'bearer' | 'x-api-key' | HeaderAuth | QueryAuth;

/** The key in a header of the vendor's choosing. */
export interface HeaderAuth {
  /** Lower case header name, e.g. `x-acme-key`. */
  readonly header: string;
  /** Text sent before the key, e.g. `Token `. Default: none. */
  readonly prefix?: string;
}

/** The key as a query parameter of the upstream URL. */
export interface QueryAuth {
  /** The parameter name, e.g. `key`. */
  readonly query: string;
}

/**
 * Which spellings of a model ID a route accepts.
 * - `prefixed`: `<vendor>/<model>`, e.g. `acme/acme-large-2`.
 * - `native`: the bare model name, e.g. `acme-large-2`.
 */
export type ModelIdForm = 'prefixed' | 'native';

/** One upstream route of a provider. */
export interface UpstreamRoute {
  /** Appended to the provider's base URL (which carries the version prefix), e.g. `/chat/completions`. */
  readonly path: string;
  /** The wire format the upstream speaks on this path. */
  readonly format: WireFormat;
  /** How the upstream credential is sent. */
  readonly auth: AuthStyle;
  /** ID spellings a client may use on this route. Default: `['prefixed']`. */
  readonly modelIds?: readonly ModelIdForm[];
  /**
   * Client request headers passed through to the upstream (lower case), e.g. a version header such as `x-api-version`.
   */
  readonly forwardHeaders?: readonly string[];
  /**
   * Headers sent when the client did not send them (lower case names), e.g. a default version header.
   * Never a credential: `authorization`, `x-api-key` and the header named by `auth` are refused at load.
   */
  readonly defaultHeaders?: Readonly<Record<string, string>>;
  /**
   * For a vendor whose wire format is not the route's: the hooks that build its request from the
   * client's and map its answers back to the route's format (see {@link RouteAdapter}). `path` and
   * `auth` are then the vendor's; `format` stays the route's own (what the adapter maps to). Absent:
   * the vendor speaks the route's format and the client's body and the vendor's answer are forwarded
   * byte for byte.
   */
  readonly adapter?: RouteAdapter;
}

/** Prices in USD per one million tokens. */
export interface ModelPricing {
  /** Uncached input (prompt) tokens. */
  readonly input: number;
  /** Input tokens read from the provider's prompt cache. */
  readonly cachedInput: number;
  /** Output (completion) tokens, reasoning included. */
  readonly output: number;
}

/** One concrete model of a provider. */
export interface ModelDeclaration {
  /** The model name without the vendor prefix, e.g. `acme-large-2`. Its canonical ID is `<vendor>/<id>`. */
  readonly id: string;
  /** The model name sent upstream. Default: `id`. */
  readonly upstreamModel?: string;
  /** Per-route upstream model names, where a route's upstream names the model differently. */
  readonly upstreamModels?: Partial<Readonly<Record<RouteId, string>>>;
  /** Further IDs a client may use for this model on every route it serves (they resolve to this entry). */
  readonly alternateIds?: readonly string[];
  /** Whether `GET /v1/models` lists the model. Hidden models are still accepted on requests. */
  readonly listed: boolean;
  /** The routes that accept the model. Each must be declared in the plugin's `routes` (or `nativeChat` for `chat`). */
  readonly routes: readonly RouteId[];
  /** Prices used for cost accounting. */
  readonly pricing: ModelPricing;
  /** Whether the provider's native web search tool is available for this model. */
  readonly webSearch?: boolean;
  /**
   * The most output tokens the model produces when a request sets no cap: what a request without
   * `max_tokens` (or its route's equivalent) reserves on token and money limits. Default: 4096.
   */
  readonly maxOutputTokens?: number;
}

/** A latest alias: a bare ID (no vendor prefix) that resolves to one of the plugin's models. */
export interface AliasDeclaration {
  /** The alias, e.g. `acme-latest`. */
  readonly id: string;
  /** The canonical ID of the target model, e.g. `acme/acme-large-2`. Ops may override it in the gateway config. */
  readonly target: string;
  /** The routes that accept the alias. The target model must serve each of them. */
  readonly routes: readonly RouteId[];
  /** Whether `GET /v1/models` lists the alias (ahead of the provider's models). Default: true. */
  readonly listed?: boolean;
}

/** One server-sent event, as parsed from the stream. */
export interface SseEvent {
  /** The `event:` field, when the event has one. */
  readonly event?: string;
  /** The `data:` lines joined with `\n`. */
  readonly data: string;
  /** The `id:` field, when the event has one. */
  readonly id?: string;
}

/**
 * A pure function over one parsed SSE event of a stream.
 *
 * Receives: one {@link SseEvent} of the upstream's stream on the declared route and models, as parsed
 * (`data` is the raw text, not parsed JSON; `[DONE]` included), after the fixups declared before it.
 * Returns: `undefined` (or the same event) to forward the original bytes unchanged, `null` to drop the
 * event, or a new event to forward in its place (its other lines and line endings are kept). A new
 * event's `data` is a string, and its `event` and `id` strings when given. Anything else, or a throw,
 * is the plugin's fault (see {@link StatefulStreamFixup}).
 *
 * @example
 * ```ts
 * // Drops the {"object":"keepalive"} events an upstream interleaves.
 * const dropKeepalive: StreamFixup = (event) => (event.data === '{"object":"keepalive"}' ? null : undefined);
 * ```
 */
export type StreamFixup = (event: SseEvent) => SseEvent | null | undefined;

/**
 * A stream fixup that may keep per-stream state and put out any number of events. Every
 * {@link StreamFixup} is one.
 *
 * Receives: the event, as a {@link StreamFixup} does, and this stream's `state`.
 * Returns: what a `StreamFixup` may, or a list of events to forward in the event's place, in order
 * (`[]` drops it; the first keeps the event's other lines).
 *
 * `state` is what the declaration's `createState()` made for this stream (one per stream, never
 * shared), so a fixup may hold events back and release them later, e.g. to reassemble a tool call's
 * arguments split across chunks. Without `createState` it is `undefined`.
 * A fixup that throws, or returns anything else (a number, an object without a string `data`, a list
 * with such an item), is the plugin's fault: the answer is a 502 naming the plugin when no byte of the
 * stream reached the client yet, else the stream ends with an in-band error naming it.
 *
 * @example
 * ```ts
 * // Drops an event that repeats the one before it; declared with `createState: () => ({ last: undefined })`.
 * const dropRepeats: StatefulStreamFixup<{ last?: string }> = (event, state) => {
 *   const repeat = event.data === state.last;
 *   state.last = event.data;
 *   return repeat ? [] : undefined;
 * };
 * ```
 */
export type StatefulStreamFixup<State = undefined> = (
  event: SseEvent,
  state: State,
) => SseEvent | readonly SseEvent[] | null | undefined;

/** A stream fixup and the route and models it applies to. */
export interface StreamFixupDeclaration<State = any> {
  /** A short name for logs and errors. */
  readonly name: string;
  /** The route whose streams the fixup sees. */
  readonly route: UpstreamRouteId;
  /** Canonical IDs of the models whose streams the fixup sees. */
  readonly models: readonly string[];
  /**
   * Makes the fixup's state for one stream, called as the stream starts. Optional: stateless fixups
   * have none. Receives nothing; returns anything (the state is the plugin's own); a throw is the
   * plugin's fault.
   *
   * @example
   * ```ts
   * createState: () => ({ last: undefined as string | undefined }),
   * ```
   */
  readonly createState?: () => State;
  /** The fixup itself: a {@link StreamFixup}, or a {@link StatefulStreamFixup} of `createState`'s state. */
  readonly fixup: StatefulStreamFixup<State>;
}

/**
 * Declares one stream fixup with its per-stream state, so that the compiler checks `fixup` against
 * what `createState` makes. The identity function, like {@link definePlugin}.
 */
export function defineStreamFixup<State>(declaration: StreamFixupDeclaration<State>): StreamFixupDeclaration<State> {
  return declaration;
}

/**
 * Token usage of one upstream answer, normalised to one meaning across the wire formats.
 * `inputTokens` counts every prompt token, cached ones included; `cachedTokens` counts the prompt
 * tokens read from the provider's cache (a part of `inputTokens`).
 */
export interface TokenUsage {
  readonly inputTokens: number;
  readonly outputTokens: number;
  readonly cachedTokens: number;
}

/**
 * Reads usage from one upstream answer. The core holds a standard extractor per wire format; a plugin
 * declares its own only where its upstream reports usage differently. Each method returns `undefined`
 * or a {@link TokenUsage} whose three counts are finite numbers, not negative (further fields are
 * ignored); anything else (a string, `{ input_tokens: 5 }`, a count that is a string or NaN) is the
 * plugin's fault, like a throw. `plugin test` checks an extractor against the standard usage shapes of
 * the mock upstream, or, where the plugin ships recorded fixtures with a `usage`, against those.
 */
export interface UsageExtractor {
  /**
   * Usage of a JSON (non-streaming) answer.
   *
   * Receives: the upstream's 2xx answer body, parsed with `JSON.parse` (an object, a list or any JSON
   * value: check before reading; a body that is not JSON never reaches it). On `/v1/chat` it is the
   * answer of the native chat adapter's route.
   * Returns: the usage, or `undefined` when the body carries none (a Chat Completions answer or a
   * `/v1/chat` answer without usage is then refused with a 502).
   *
   * @example
   * ```ts
   * // {"choices": [...], "meta": {"billed": {"in": 12, "out": 7}}}
   * fromBody: (body) => {
   *   const billed = (body as { meta?: { billed?: { in?: number; out?: number } } } | null)?.meta?.billed;
   * return typeof billed?.in === 'number' ? { inputTokens: billed.in, outputTokens: billed.out ?? 0, cachedTokens: 0 }
   * : undefined; },
   * ```
   */
  readonly fromBody: (body: unknown) => TokenUsage | undefined;
  /**
   * Folds one SSE event of a stream into the usage seen so far. Pure: returns the new value (or the
   * same one). The value after the last event is what the request is recorded with.
   *
   * Receives: `seen`, what it returned for the previous event (`undefined` before the first), and every
   * event of the upstream's stream, in order, as the upstream sent it (before any stream fixup): an
   * {@link SseEvent} whose `data` is the raw text of its `data:` lines (not parsed: `JSON.parse` it
   * yourself, and expect `[DONE]` and other text), with `event` and `id` when the upstream sent them.
   * Blocks without a `data:` line (comments, keep-alives) are not passed.
   * Returns: the usage so far, `seen` unchanged, or `undefined`.
   *
   * @example
   * ```ts
   * // the last event: data: {"choices":[],"meta":{"billed":{"in":12,"out":7}}}
   * fromStreamEvent: (seen, event) => {
   *   if (!event.data.includes('"billed"')) return seen; // cheap test first: it sees every event
   *   try {
   *     const billed = JSON.parse(event.data).meta?.billed;
   * return typeof billed?.in === 'number' ? { inputTokens: billed.in, outputTokens: billed.out ?? 0, cachedTokens: 0 }
   * : seen;
   *   } catch {
   *     return seen;
   *   }
   * },
   * ```
   */
  readonly fromStreamEvent: (seen: TokenUsage | undefined, event: SseEvent) => TokenUsage | undefined;
}

/** A usage extractor and the route and models it applies to. */
export interface UsageExtractorDeclaration {
  /** The route whose answers the extractor reads. */
  readonly route: UpstreamRouteId;
  /** Canonical IDs of the models it applies to; every model of the plugin when omitted. */
  readonly models?: readonly string[];
  readonly extractor: UsageExtractor;
}

/** The native chat request (`POST /v1/chat`) after validation, as an adapter receives it. */
export interface NativeChatRequest {
  /** The model name the upstream route expects (the plugin's upstream name for the resolved model). */
  readonly upstreamModel: string;
  /** The plain text user input. */
  readonly input: string;
  readonly temperature?: number;
  readonly maxOutputTokens?: number;
  /** Whether to turn on the provider-native web search tool (only for models declaring `webSearch`). */
  readonly webSearch: boolean;
}

/**
 * Maps the native text chat route onto one of the plugin's upstream routes. The core owns the route,
 * validation, retries and usage; the adapter owns only the format mapping, and always asks for the
 * provider's low reasoning preset. A hook that throws or returns another shape than its own (an object
 * `JSON.stringify` can write; a string or `undefined`) is the plugin's fault.
 */
export interface NativeChatAdapter {
  /** The upstream route (declared in the plugin's `routes`) the request is sent to. */
  readonly route: UpstreamRouteId;
  /**
   * Builds the upstream JSON request body.
   *
   * Receives: the validated {@link NativeChatRequest} (`upstreamModel`, `input`, `webSearch`, and
   * `temperature` and `maxOutputTokens` when the client set them).
   * Returns: an object (not a list) that `JSON.stringify` writes as a JSON object (no `BigInt`, no
   * cycle), sent as the body of the adapter's `route`.
   *
   * @example
   * ```ts
   * buildRequest: ({ upstreamModel, input }) => ({
   *   model: upstreamModel, messages: [{ role: 'user', content: input }], reasoning_effort: 'low', stream: false,
   * }),
   * ```
   */
  readonly buildRequest: (request: NativeChatRequest) => Record<string, unknown>;
  /**
   * Reads the generated text from the upstream JSON answer.
   *
   * Receives: the upstream's 2xx answer body, parsed with `JSON.parse` (any JSON value: check before
   * reading).
   * Returns: the text, or `undefined` (not `null`) when the answer has none (a refusal, only tool
   * calls): `/v1/chat` then answers an error rather than empty text.
   *
   * @example
   * ```ts
   * readText: (body) => {
   * const content = (body as { choices?: { message?: { content?: unknown } }[] } |
   * null)?.choices?.[0]?.message?.content;
   *   return typeof content === 'string' ? content : undefined;
   * },
   * ```
   */
  readonly readText: (body: unknown) => string | undefined;
}

// ---------------------------------------------------------------------------------------------------
// Route adapters: a vendor whose wire format is not the route's, served on that route.

/** What every hook of a {@link RouteAdapter} is told about the request it serves. */
export interface AdapterContext {
  /** The client route, e.g. `chat-completions`. */
  readonly route: UpstreamRouteId;
  /** The canonical ID of the model being tried, e.g. `acme/acme-1` (a fallback's, once the request moved on). */
  readonly model: string;
  /** The name the vendor knows the model by (the model's `upstreamModels[route]`, `upstreamModel` or `id`). */
  readonly upstreamModel: string;
  /** Whether the client asked for a stream. */
  readonly stream: boolean;
  /** The gateway's id of the request (the client's `x-request-id`, else a fresh one), e.g. for the answer's `id`. */
  readonly requestId: string;
  /** When the gateway took the request, in Unix seconds, e.g. for the answer's `created`. */
  readonly created: number;
}

/** The client's request as an adapter reads it. */
export interface AdapterRequest extends AdapterContext {
  /**
   * The client's JSON body in the route's format, as the gateway validated it (and as a request
   * guardrail left it): for `chat-completions`, `{ model, messages, max_tokens?, tools?, … }`. Read it,
   * never change it.
   */
  readonly body: Readonly<Record<string, unknown>>;
}

/** The vendor's request, as {@link RouteAdapter.buildRequest} makes it. */
export interface AdaptedRequest {
  /** The JSON body sent (an object `JSON.stringify` can write). */
  readonly body: Record<string, unknown>;
  /**
   * Appended to the endpoint's base URL, starting with `/`, and may carry a query (`/v2/generate?stream=1`).
   * Default: the route's `path`.
   */
  readonly path?: string;
  /** Default: `POST`. */
  readonly method?: 'POST' | 'PUT';
  /**
   * Headers the vendor needs beside the JSON content type (lower case names), e.g. `{ accept: 'text/event-stream' }`.
   * Never a credential (`authorization`, `x-api-key`, the route's `auth` header) nor `host`,
   * `content-length`, `transfer-encoding` or `connection`: the gateway sets those.
   */
  readonly headers?: Readonly<Record<string, string>>;
}

/** One reason an adapter refuses a client's request: answered as the route's 400, every problem listed. */
export interface RequestProblem {
  /** The client's field, e.g. `tools` or `messages[2].content`. */
  readonly field: string;
  /** What is wrong with it, for the client, e.g. `this model's provider has no tool calling`. */
  readonly message: string;
}

/** A vendor's error answer: its status (400 or more) and its body, parsed (its text when it is not JSON). */
export interface VendorError {
  readonly status: number;
  readonly body: unknown;
}

/** A vendor's error, told in the route's words: the gateway writes it in the route's error envelope. */
export interface AdaptedError {
  /** The message the client's SDK shows. */
  readonly message: string;
  /**
   * The envelope's `type`, e.g. `invalid_request_error`, `rate_limit_error`. Default: by the status
   * (`invalid_request_error` for 4xx, `api_error` for 5xx).
   */
  readonly type?: string;
  /** The envelope's `code` (Chat Completions and Responses), e.g. `context_length_exceeded`. */
  readonly code?: string;
  /** The client's field the error is about (Chat Completions and Responses). */
  readonly param?: string;
  /** The status the client gets, 400 to 599. Default: the vendor's own. */
  readonly status?: number;
}

/** The route's events made of one vendor event: one, a list, or none (`null`, `undefined`, `[]`). */
export type MappedEvents = SseEvent | readonly SseEvent[] | null | undefined;

/** An event of the vendor's stream, named by its `event:` field, or chosen by a predicate. */
export type EventMatch = string | ((event: SseEvent) => boolean);

/**
 * How a vendor's stream becomes the route's: a pure function over each parsed event, with state for
 * one stream. The gateway reads the vendor's usage from the same events with the adapter's
 * {@link RouteAdapter.usage}, before mapping them, and writes the route's own closing events once the
 * `terminal` event came: on Chat Completions, the usage chunk (`choices: []`, when the client set
 * `stream_options.include_usage`) and `data: [DONE]`; on Messages, `message_stop`. A stream that ends
 * before its terminal event is recorded as cut (`upstream_cut`).
 */
export interface StreamMapping<State = any> {
  /** The vendor's event that completes a stream, e.g. `'end'` (its `event:` name) or a predicate. */
  readonly terminal: EventMatch;
  /**
   * The vendor's event that reports an error in a stream, e.g. `'error'`. Before any other event it
   * fails the attempt over to the next endpoint, as an error answer would; later it is mapped like any
   * event (to the route's in-band error). Default: none.
   */
  readonly error?: EventMatch;
  /**
   * Makes the mapping's state for one stream, as it starts (one per stream, never shared). Receives the
   * request's {@link AdapterContext}; a throw is the plugin's fault.
   */
  readonly createState?: (context: AdapterContext) => State;
  /**
   * Maps one event of the vendor's stream (its `event:` name, `data` as raw text: `JSON.parse` it) to
   * the route's events, in order: an event, a list (`[]` or `null` for none), each `{ data, event?, id? }`
   * with `data` the route's JSON as text (`JSON.stringify(chunk)`), written whole (the vendor's lines are
   * not kept). The terminal event is mapped too (e.g. to the chunk carrying `finish_reason`), before the
   * gateway's closing events. Blocks without a `data:` line (comments) are not passed. A throw, or
   * anything else returned, is the plugin's fault.
   *
   * @example
   * ```ts
   * // event: chunk, data: {"say":"Hel"}  →  data: {"object":"chat.completion.chunk","choices":[{"delta":…}]}
   * map: (event, state, context) => {
   *   if (event.event !== 'chunk') return null;
   *   return { data: JSON.stringify(chunkOf(state, context, { content: JSON.parse(event.data).say }, null)) };
   * },
   * ```
   */
  readonly map: (event: SseEvent, state: State, context: AdapterContext) => MappedEvents;
}

/**
 * The hooks that serve a route (`routes.<route>.adapter`) from a vendor whose wire format is not the
 * route's: the client speaks the route's format (the official SDKs work as with any other model), the
 * vendor its own. The gateway keeps everything else as on a forwarded route: validation, limits and
 * reservations (estimated from the client's request), failover and breakers, guardrails on the text the
 * client gets, the response cache, traces, usage and cost (from {@link usage}). Every hook is pure and
 * synchronous; a throw, or a result of another shape than its own, is the plugin's fault (a 502 naming
 * the plugin and the hook, or an in-band error once a stream started; usage read before it is kept).
 *
 * @example
 * ```ts
 * routes: {
 *   'chat-completions': {
 *     path: '/v2/generate', format: 'chat-completions', auth: { header: 'authorization', prefix: 'Token ' },
 *     adapter: { checkRequest, buildRequest, mapAnswer, stream: { terminal: 'end', map }, mapError, usage },
 *   },
 * },
 * ```
 */
export interface RouteAdapter<State = any> {
  /**
   * Refuses what the vendor cannot do (tools with a vendor that has none, several choices…), before
   * anything is reserved or sent: each problem is one line of the route's 400. Returns `[]` or
   * `undefined` when the request fits.
   */
  readonly checkRequest?: (request: AdapterRequest) => readonly RequestProblem[] | undefined;
  /** Builds the vendor's request from the client's (see {@link AdaptedRequest}); called once per model tried. */
  readonly buildRequest: (request: AdapterRequest) => AdaptedRequest;
  /**
   * Maps the vendor's 2xx JSON answer (parsed: check before reading) to the route's answer, e.g. a
   * `chat.completion` object. The gateway writes the route's `usage` field itself, from {@link usage}.
   */
  readonly mapAnswer: (body: unknown, context: AdapterContext) => Record<string, unknown>;
  /** How the vendor's stream becomes the route's; absent: the vendor does not stream (`stream: true` is a 400). */
  readonly stream?: StreamMapping<State>;
  /**
   * Tells a vendor's error answer (a status of 400 or more; `body` parsed, or its text when it is not
   * JSON) in the route's words; `undefined` (or no hook) gives the gateway's own message with the
   * vendor's status. The gateway writes it in the route's error envelope.
   */
  readonly mapError?: (error: VendorError, context: AdapterContext) => AdaptedError | undefined;
  /**
   * Reads usage from the vendor's own shapes: `fromBody` from its 2xx JSON answer, `fromStreamEvent`
   * from each event of its stream as it sent it (before mapping). It is the route's usage extractor
   * (also for `/v1/chat` when `nativeChat` uses this route), unless `usageExtractors` declares one.
   */
  readonly usage: UsageExtractor;
}

/**
 * Declares a route adapter with its stream mapping's state, so that the compiler checks `map` against
 * what `createState` makes. The identity function, like {@link definePlugin}.
 */
export function defineAdapter<State>(adapter: RouteAdapter<State>): RouteAdapter<State> {
  return adapter;
}

/** A provider plugin: everything the gateway knows about one upstream vendor. */
export interface ProviderPlugin {
  /** The contract version the plugin is written for (one of {@link SUPPORTED_CONTRACT_VERSIONS}); checked at load. */
  readonly contract: ContractVersion;
  /** The vendor prefix of the plugin's model IDs, e.g. `acme`. Lower case letters, digits and dashes. */
  readonly vendor: string;
  /**
   * Prefix of the provider's environment variables (`<PREFIX>_BASE_URL`, `<PREFIX>_API_KEY`).
   * Default: the vendor in upper case with dashes as underscores.
   */
  readonly envPrefix?: string;
  /** The upstream routes the provider serves. */
  readonly routes: Partial<Readonly<Record<UpstreamRouteId, UpstreamRoute>>>;
  /** The provider's concrete models, in catalog order. */
  readonly models: readonly ModelDeclaration[];
  /** The provider's latest aliases. */
  readonly aliases?: readonly AliasDeclaration[];
  /** Stream fixups, each scoped to a route and models. */
  readonly streamFixups?: readonly StreamFixupDeclaration[];
  /** Usage extractors that replace the core's standard one for a route (and models). */
  readonly usageExtractors?: readonly UsageExtractorDeclaration[];
  /** How the native text chat route `POST /v1/chat` reaches this provider. Required when a model serves `chat`. */
  readonly nativeChat?: NativeChatAdapter;
}

/**
 * `Actual` with every field that `Shape` does not have turned into a type that names the mistake, so
 * that a misspelled field (`defaultHeader`, `streamFixup`) fails to compile; nested objects and lists
 * are checked the same way, functions are left as they are.
 */
/** The fields of any member of a union (`keyof` of a union gives only the fields all members share). */
type KeysOfAny<T> = T extends unknown ? keyof T : never;
/** A field's type in whichever members of a union have it. */
type FieldOfAny<T, Key> = T extends unknown ? (Key extends keyof T ? T[Key] : never) : never;

export type Exact<Shape, Actual> = Actual extends (...args: never[]) => unknown
  ? Actual
  : Actual extends readonly unknown[]
    ? NonNullable<Shape> extends readonly (infer Item)[]
      ? { readonly [Index in keyof Actual]: Exact<Item, Actual[Index]> }
      : Actual
    : Actual extends object
      ? {
          readonly [Key in keyof Actual]: Key extends KeysOfAny<NonNullable<Shape>>
            ? Exact<FieldOfAny<NonNullable<Shape>, Key>, Actual[Key]>
            : `unknown field '${Key & string}': not part of the plugin contract (see ProviderPlugin)`;
        }
      : Actual;

/**
 * Declares a provider plugin. The identity function that lets the compiler check the declaration,
 * exactly: a field the contract does not know is a compile error (and is refused at load as well).
 */
export function definePlugin<const Plugin extends ProviderPlugin>(
  plugin: Plugin & Exact<ProviderPlugin, Plugin>,
): Plugin {
  return plugin;
}

// ---------------------------------------------------------------------------------------------------
// Guardrail plugins: the second kind of plugin, loaded from the same manifests.

/** Where a guardrail reads text: what the client sends (`request`), or what comes back to it (`response`). */
export type GuardrailPhase = 'request' | 'response';

/** What a guardrail's {@link GuardrailPlugin.scan} is told about the text it reads. */
export interface GuardrailContext {
  readonly phase: GuardrailPhase;
  /** The client route: `chat-completions`, `messages`, `count-tokens`, `responses` or `chat`. */
  readonly route: RouteId;
  /** The canonical ID of the model serving the request, e.g. `acme/acme-1`. */
  readonly model: string;
  /** The guardrail's `options` from the gateway's config file (`{}` when it gives none). */
  readonly options: Readonly<Record<string, unknown>>;
}

/**
 * One stretch of a text a guardrail objects to: `[start, end)` in UTF-16 code units (JavaScript string
 * indexes), `start < end`, within the text.
 */
export interface GuardrailFinding {
  readonly start: number;
  readonly end: number;
  /**
   * What stands in for the stretch when the guardrail is configured to redact. Default: the config's
   * `replacement`, else `[REDACTED]`.
   */
  readonly replacement?: string;
}

/**
 * A guardrail plugin: a check on text, made with {@link defineGuardrail}. It lives in a plugins
 * directory beside provider plugins (`<dir>/<name>/index.js`, listed in that directory's
 * `manifest.json`, the repository's or one in `GATEWAY_PLUGIN_PATH`), and an operator turns it on in the
 * config file, where what it does with a finding is set (`action: block` or `redact`) and on which
 * phase (`on: request | response | both`):
 *
 * ```yaml
 * guardrails:
 *   - { name: no-acme-codes, use: acme-codes, on: both, action: block, options: { prefix: ACME } }
 * ```
 *
 * The gateway runs `scan` on every text the model reads in a request (messages of every role, names,
 * tools and their schemas, tool calls' arguments) or of an answer (message text, text deltas of a
 * stream, tool-call arguments), one text at a time, as it matches them: NFKC-normalised, invisible
 * characters left out, JSON escapes undone in a call's arguments (the findings are mapped back). In a
 * stream it holds back the last `maxFindingChars - 1` characters of each text so that a finding split
 * across events is still seen whole, and releases the rest at once. `docs/plugins.md`
 * and `docs/guardrails.md` are the guides.
 *
 * @example
 * ```ts
 * import { defineGuardrail } from 'model-gateway/plugin';
 *
 * export default defineGuardrail({
 *   contract: 1,
 *   guardrail: 'acme-codes',
 *   maxFindingChars: 16,
 * scan: (text) => [...text.matchAll(/ACME-\d{6}/g)].map((match) => ({ start: match.index, end: match.index +
 * match[0].length })), });
 * ```
 */
export interface GuardrailPlugin {
  /** The contract version the guardrail is written for (one of {@link SUPPORTED_CONTRACT_VERSIONS}). */
  readonly contract: ContractVersion;
  /**
   * The guardrail's name, which a config entry's `use:` names; equals its folder and manifest name.
   * Lower case letters, digits and dashes.
   */
  readonly guardrail: string;
  /**
   * The longest text one finding may span, in UTF-16 code units (a positive integer): how much of a
   * stream's text the gateway holds back so that a finding split across events is seen whole. A finding
   * longer than this may be released in part before it is complete. Default: 256 (an operator may set
   * another with the config entry's `windowChars`).
   */
  readonly maxFindingChars?: number;
  /**
   * Checks the config entry's `options` once, when the gateway starts or reloads its configuration.
   *
   * Receives: the entry's `options` (`{}` when it gives none).
   * Returns: the problems, one sentence each (`[]` or `undefined` when the options fit); they refuse the
   * configuration, named by the entry (`guardrails[2].options: …`). A throw is the plugin's fault.
   *
   * @example
   * ```ts
   * checkOptions: (options) => (options.prefix === undefined || typeof options.prefix === 'string' ? [] : ['prefix must
   * be a string']),
   * ```
   */
  readonly checkOptions?: (options: Readonly<Record<string, unknown>>) => readonly string[] | undefined;
  /**
   * Finds what the guardrail objects to in one text. Pure and synchronous: it is called on every text
   * of every request (and, in streams, on each window of held text), so it must be fast, keep no state
   * between calls and do no I/O (a remote check is the built-in `webhook` guardrail's job).
   *
   * Receives: the text, and the {@link GuardrailContext} (phase, route, model, the entry's options).
   * Returns: the findings (`[]` or `undefined`: nothing), each a {@link GuardrailFinding} within the
   * text; they may come in any order and overlap (the gateway merges them). Anything else (a finding out
   * of the text's bounds, `start >= end`, a replacement that is not a string), or a throw, is the
   * plugin's fault: logged with the guardrail and the hook `scan`, counted in
   * `gateway_plugin_errors_total`, and answered as `GW_ERR_PLUGIN_FAULT` (a 502; in band in a stream that
   * started). The gateway never fails open on a faulty guardrail.
   *
   * @example
   * ```ts
   * scan: (text) => {
   *   const at = text.indexOf('forbidden');
   *   return at === -1 ? [] : [{ start: at, end: at + 'forbidden'.length, replacement: '[…]' }];
   * },
   * ```
   */
  readonly scan: (text: string, context: GuardrailContext) => readonly GuardrailFinding[] | undefined;
}

/**
 * Declares a guardrail plugin. The identity function, like {@link definePlugin}: the compiler checks the
 * declaration exactly (a field the contract does not know is a compile error, and is refused at load).
 */
export function defineGuardrail<const Guardrail extends GuardrailPlugin>(
  guardrail: Guardrail & Exact<GuardrailPlugin, Guardrail>,
): Guardrail {
  return guardrail;
}
