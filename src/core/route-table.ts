import { parse as parseLegacyUrl } from 'node:url';
import type { ErrorFamily } from './error-body.ts';
import type { RouteId, WireFormat } from '../plugins/plugin-contract.ts';

/** Whose rate-limit headers a route answers with: OpenAI's `x-ratelimit-*` or Anthropic's `anthropic-ratelimit-*`. */
export type RateLimitHeaderStyle = 'openai' | 'anthropic';

/** A header a client may present its API key in. */
export type KeyHeader = 'authorization' | 'x-api-key';

/** One model route: everything the way in, the error bodies, the logs, the metrics and the docs know of it. */
export interface ModelRoute {
  readonly id: RouteId;
  /** The canonical path; see {@link modelRouteAt} for the spellings accepted. */
  readonly path: string;
  /** The one method served; any other answers 405 naming it. */
  readonly method: 'POST';
  /** The wire format the client speaks (`native` for the gateway's own text route). */
  readonly format: WireFormat | 'native';
  /** The error envelope, so the official SDK of the format shows the gateway's messages. */
  readonly family: ErrorFamily;
  /** Where the API key may be presented (Authorization wins when both are sent). */
  readonly keyHeaders: readonly KeyHeader[];
  /** The `route` label of metrics and access-log lines. */
  readonly metricsLabel: string;
  /** Whether the answer can be an SSE stream. */
  readonly streams: boolean;
  /**
   * The request fields that cap a request's output, first found wins, for the reservation on token and
   * money limits; absent on a route whose requests generate nothing (count_tokens reserves nothing).
   */
  readonly outputCapFields?: readonly string[];
  /** The rate-limit headers the route's clients read (`x-ratelimit-*` or `anthropic-ratelimit-*`); none when absent. */
  readonly rateLimitHeaders?: RateLimitHeaderStyle;
  /**
   * The GenAI conventions' `gen_ai.operation.name` of the upstream call (`chat`), naming its client span
   * and labelling the GenAI metrics; count_tokens, which generates nothing, is `count_tokens`.
   */
  readonly genAiOperation: string;
  /** The OpenAPI operation's summary and request schema name. */
  readonly summary: string;
  readonly requestSchema: string;
}

const BEARER: readonly KeyHeader[] = ['authorization'];
const BEARER_OR_API_KEY: readonly KeyHeader[] = ['authorization', 'x-api-key'];

/** The model routes, in the order the OpenAPI document lists them. */
export const ROUTE_TABLE: Readonly<Record<RouteId, ModelRoute>> = {
  'chat-completions': {
    id: 'chat-completions',
    path: '/v1/chat/completions',
    method: 'POST',
    format: 'chat-completions',
    family: 'completions-envelope',
    keyHeaders: BEARER,
    metricsLabel: 'chat-completions',
    genAiOperation: 'chat',
    outputCapFields: ['max_completion_tokens', 'max_tokens'],
    streams: true,
    rateLimitHeaders: 'openai',
    summary: "Chat Completions, forwarded to the model's provider",
    requestSchema: 'ChatCompletionsRequest',
  },
  responses: {
    id: 'responses',
    path: '/v1/responses',
    method: 'POST',
    format: 'responses',
    family: 'completions-envelope',
    keyHeaders: BEARER,
    metricsLabel: 'responses',
    genAiOperation: 'chat',
    outputCapFields: ['max_output_tokens'],
    streams: true,
    rateLimitHeaders: 'openai',
    summary: "Responses, forwarded to the model's provider",
    requestSchema: 'ResponsesRequest',
  },
  messages: {
    id: 'messages',
    path: '/v1/messages',
    method: 'POST',
    format: 'messages',
    family: 'messages-envelope',
    keyHeaders: BEARER_OR_API_KEY,
    metricsLabel: 'messages',
    genAiOperation: 'chat',
    outputCapFields: ['max_tokens'],
    streams: true,
    rateLimitHeaders: 'anthropic',
    summary: "Messages, forwarded to the model's provider",
    requestSchema: 'MessagesRequest',
  },
  'count-tokens': {
    id: 'count-tokens',
    path: '/v1/messages/count_tokens',
    method: 'POST',
    format: 'count-tokens',
    family: 'messages-envelope',
    keyHeaders: BEARER_OR_API_KEY,
    metricsLabel: 'count-tokens',
    genAiOperation: 'count_tokens',
    streams: false,
    rateLimitHeaders: 'anthropic',
    summary: 'Token count of a Messages request',
    requestSchema: 'CountTokensRequest',
  },
  chat: {
    id: 'chat',
    path: '/v1/chat',
    method: 'POST',
    format: 'native',
    family: 'plain',
    keyHeaders: BEARER,
    metricsLabel: 'chat',
    genAiOperation: 'chat',
    outputCapFields: ['max_output_tokens'],
    streams: false,
    summary:
      'Native text chat: plain text in, plain text out, never streamed; retries and timeouts handled by the gateway',
    requestSchema: 'NativeChatRequest',
  },
};

export const MODEL_ROUTES: readonly ModelRoute[] = Object.values(ROUTE_TABLE);

/** The canonical path of a route. */
export function routePath(id: RouteId): string {
  return ROUTE_TABLE[id].path;
}

/**
 * `GET /v1/usage` (a control-plane route, in the spellings Express matches) is read by the clients of
 * the OpenAI-compatible routes with the same key, so it answers in their envelope.
 */
const OWN_USAGE = /^\/v1\/usage\/?$/i;

// Longest path first: `/v1/chat/completions` before `/v1/chat`, `/v1/messages/count_tokens` before `/v1/messages`.
const BY_PREFIX = [...MODEL_ROUTES].sort((a, b) => b.path.length - a.path.length);

/**
 * The error envelope of any path (without its query): the family of the model route whose path it
 * starts with (so an unknown path under `/v1/messages` answers in the Messages envelope), the Chat
 * Completions envelope for `/v1/usage`, else `plain`.
 * A spelling the way in accepts (see {@link modelRouteAt}) is read as its canonical path.
 */
export function errorFamilyOf(path: string): ErrorFamily {
  const route = modelRouteAt(path);
  if (route) return route.family;
  if (OWN_USAGE.test(path)) return 'completions-envelope';
  for (const candidate of BY_PREFIX)
    if (candidate.family !== 'plain' && path.startsWith(candidate.path)) return candidate.family;
  return 'plain';
}

const escape = (path: string) => path.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&');
// As Express 5 (router 2, path-to-regexp 8, not strict, not case sensitive) matches a route's path.
const SHORTEST = Math.min(...MODEL_ROUTES.map((route) => route.path.length));
const LONGEST = Math.max(...MODEL_ROUTES.map((route) => route.path.length));
const MATCHERS: readonly (readonly [RegExp, ModelRoute])[] = MODEL_ROUTES.map((route) => [
  new RegExp(`^(?:${escape(route.path)})(?:\\/$)?$`, 'i'),
  route,
]);

/**
 * The model route a pathname (no query) names, in every spelling the gateway has always accepted:
 * any letter case, with or without one trailing slash (as Express matched them). Nothing else: no
 * decoding of escapes, no second slash.
 */
export function modelRouteAt(pathname: string): ModelRoute | undefined {
  // Cheap refusal first, by length.
  if (pathname.length < SHORTEST || pathname.length > LONGEST + 1) return undefined;
  for (const [matcher, route] of MATCHERS) if (matcher.test(pathname)) return route;
  return undefined;
}

/**
 * A request target's pathname as Express reads it (the `parseurl` package: the part before `?` of an
 * origin-form target, else Node's legacy URL parser's pathname, so `http://host/v1/chat` is `/v1/chat`);
 * undefined when it has none.
 */
export function pathnameOf(url: string): string | undefined {
  if (url.charCodeAt(0) === 0x2f) {
    let end = url.length;
    for (let index = 1; index < url.length; index += 1) {
      const code = url.charCodeAt(index);
      if (code === 0x3f) {
        if (end === url.length) end = index;
      } else if (
        code === 0x09 ||
        code === 0x0a ||
        code === 0x0c ||
        code === 0x0d ||
        code === 0x20 ||
        code === 0x23 ||
        code === 0xa0 ||
        code === 0xfeff
      ) {
        return legacyPathname(url);
      }
    }
    return url.slice(0, end);
  }
  return legacyPathname(url);
}

function legacyPathname(url: string): string | undefined {
  try {
    return parseLegacyUrl(url).pathname ?? undefined;
  } catch {
    return undefined;
  }
}
