import { parseObject, type Json } from '../../core/formats/format-reading.ts';
import { WIRE_FORMATS } from '../../core/formats/index.ts';
import type { AdaptedError, SseEvent, TokenUsage, WireFormat } from '../../plugins/plugin-contract.ts';

/**
 * What the gateway itself writes in a route's format around an adapter's mapping, so that every adapted
 * vendor gets them right: the usage field of a JSON answer, from the vendor's usage, and the route's
 * own events after a stream's terminal event.
 */
interface RouteShape {
  /** The route's usage field, set on a mapped JSON answer (over anything the adapter put there). */
  readonly writeUsage: (answer: Record<string, unknown>, usage: TokenUsage) => void;
  /**
   * The events that close a stream once the vendor's terminal event is mapped. `opening` is the data of
   * the first mapped event (its id, model and creation time are repeated), `includeUsage` whether the
   * client asked for the usage event.
   */
  readonly closing: (usage: TokenUsage | undefined, opening: string | undefined, includeUsage: boolean) => SseEvent[];
}

const DONE: SseEvent = { data: '[DONE]' };
const MESSAGE_STOP: SseEvent = { event: 'message_stop', data: '{"type":"message_stop"}' };

const chatCompletionsUsage = (usage: TokenUsage) => ({
  prompt_tokens: usage.inputTokens,
  completion_tokens: usage.outputTokens,
  total_tokens: usage.inputTokens + usage.outputTokens,
  prompt_tokens_details: { cached_tokens: usage.cachedTokens },
});

/** Chat Completions: the `include_usage` chunk (`choices: []`) when asked, then `[DONE]`. */
function chatCompletionsClosing(
  usage: TokenUsage | undefined,
  opening: string | undefined,
  includeUsage: boolean,
): SseEvent[] {
  if (!includeUsage || usage === undefined) return [DONE];
  const first: Json = (opening === undefined ? undefined : parseObject(opening)) ?? {};
  const chunk = {
    id: typeof first.id === 'string' ? first.id : 'chatcmpl-usage',
    object: 'chat.completion.chunk',
    created: typeof first.created === 'number' ? first.created : Math.floor(Date.now() / 1000),
    model: typeof first.model === 'string' ? first.model : '',
    choices: [],
    usage: chatCompletionsUsage(usage),
  };
  return [{ data: JSON.stringify(chunk) }, DONE];
}

export const ROUTE_SHAPES: Readonly<Record<WireFormat, RouteShape>> = {
  'chat-completions': {
    writeUsage: (answer, usage) => void (answer.usage = chatCompletionsUsage(usage)),
    closing: chatCompletionsClosing,
  },
  messages: {
    // Messages counts cache reads apart from `input_tokens`.
    writeUsage: (answer, usage) =>
      void (answer.usage = {
        input_tokens: usage.inputTokens - usage.cachedTokens,
        output_tokens: usage.outputTokens,
        cache_read_input_tokens: usage.cachedTokens,
      }),
    closing: () => [MESSAGE_STOP],
  },
  responses: {
    writeUsage: (answer, usage) =>
      void (answer.usage = {
        input_tokens: usage.inputTokens,
        input_tokens_details: { cached_tokens: usage.cachedTokens },
        output_tokens: usage.outputTokens,
        output_tokens_details: { reasoning_tokens: 0 },
        total_tokens: usage.inputTokens + usage.outputTokens,
      }),
    // The adapter's own `response.completed` (with the whole response) is the route's last event.
    closing: () => [],
  },
  'count-tokens': {
    // A count carries its own figure (`input_tokens`), which the adapter maps.
    writeUsage: () => {},
    closing: () => [],
  },
};

/** The envelope's `type` of a vendor's error, by its status, where the adapter named none. */
function typeOf(status: number, family: 'completions-envelope' | 'messages-envelope'): string {
  if (status === 401) return 'authentication_error';
  if (status === 403) return 'permission_error';
  if (status === 404) return 'not_found_error';
  if (status === 429) return 'rate_limit_error';
  if (status < 500) return 'invalid_request_error';
  return family === 'messages-envelope' ? 'api_error' : 'server_error';
}

/**
 * A vendor's error answer in the route's error envelope (as the route's own upstreams write theirs, so
 * that the official SDK raises it with its status and message): the adapter's words, else the gateway's.
 */
export function adaptedErrorAnswer(
  format: WireFormat,
  vendorStatus: number,
  told: AdaptedError | undefined,
  provider: string,
): { status: number; bytes: Buffer } {
  const status = told?.status ?? vendorStatus;
  const messages = WIRE_FORMATS[format].errorEnvelope === 'messages-envelope';
  const family = messages ? 'messages-envelope' : 'completions-envelope';
  const message = told?.message ?? `Upstream provider '${provider}' answered ${vendorStatus}`;
  const type = told?.type ?? typeOf(status, family);
  const body =
    family === 'messages-envelope'
      ? { type: 'error', error: { type, message } }
      : { error: { message, type, param: told?.param ?? null, code: told?.code ?? null } };
  return { status, bytes: Buffer.from(JSON.stringify(body)) };
}
