import { errorBody } from '../error-body.ts';
import type { GatewayError } from '../gateway-errors.ts';
import type { TokenUsage, UsageExtractor } from '../../plugins/plugin-contract.ts';
import { count, isObject, parseObject, sseEvent, text, type Json } from './event-data.ts';
import type { WireFormatRules } from './wire-format.ts';
import { responsesTexts } from './responses-texts.ts';
import { contentParts, noteFinish, noteModel, roleMessages, type AnswerFacts, type GenAiRules } from './genai-facts.ts';

type Counts = Record<string, unknown> | null | undefined;

const OPENINGS = new Set(['response.created', 'response.in_progress']);
const END_EVENTS = new Set(['response.completed', 'response.incomplete', 'response.failed']);
const END = /"type"\s*:\s*"response\.(completed|incomplete|failed)"/;
const TERMINAL_RESPONSE_EVENTS = ['response.completed', 'response.incomplete', 'response.failed'];
// Responses deltas that are not generated text (base64 audio).
const NOT_TEXT = new Set(['response.audio.delta']);

/** Responses: `input_tokens` already includes `input_tokens_details.cached_tokens`. */
export function responsesTokens(usage: Counts): TokenUsage | undefined {
  if (!isObject(usage) || typeof usage.input_tokens !== 'number') return undefined;
  const details = usage.input_tokens_details as Counts;
  return {
    inputTokens: count(usage.input_tokens),
    outputTokens: count(usage.output_tokens),
    cachedTokens: count(details?.cached_tokens),
  };
}

/** Only the terminal events (`response.completed`, `.incomplete`, `.failed`) carry `response.usage`. */
const usage: UsageExtractor = {
  fromBody: (body) => responsesTokens((body as { usage?: Counts } | null)?.usage),
  fromStreamEvent: (seen, event) => {
    const type = event.event;
    // Named events are judged by name; data-only frames (some relays) by a substring scan.
    if (
      type?.startsWith('response.')
        ? !TERMINAL_RESPONSE_EVENTS.includes(type)
        : !TERMINAL_RESPONSE_EVENTS.some((name) => event.data.includes(`"${name}"`))
    )
      return seen;
    const payload = parseObject(event.data);
    if (!payload || !TERMINAL_RESPONSE_EVENTS.includes(payload.type as string)) return seen;
    return responsesTokens((payload.response as { usage?: Counts } | undefined)?.usage) ?? seen;
  },
};

/**
 * The Responses error event, `event: error` + `{"type":"error","code","message","param"}`, also carrying
 * `error:{…}` so that openai-node throws it rather than yielding it, and the gateway's `detail`.
 */
function inBandError(error: GatewayError): Buffer {
  const completions = errorBody(error, 'completions-envelope') as {
    detail: string;
    error: { message: string; param: unknown; code: string };
  };
  const { message, param, code } = completions.error;
  return sseEvent('error', { type: 'error', code, message, param, ...completions });
}

/** `instructions` and the first item of `input` (or the `input` string). */
function stablePrefix(body: Record<string, unknown>): readonly unknown[] {
  const input = body.input;
  const first = Array.isArray(input) ? (input as unknown[])[0] : input;
  return [body.instructions, first].filter((part) => part !== undefined);
}

/** A response's end as a finish reason: `stop` when completed, else why it is incomplete, or its status. */
function noteResponse(facts: AnswerFacts, response: Json | undefined): void {
  if (!response) return;
  noteModel(facts, response);
  const status = response.status;
  if (status === 'completed') noteFinish(facts, 'stop');
  else if (status === 'incomplete') noteFinish(facts, text(response.incomplete_details?.reason) || 'incomplete');
  else if (status === 'failed') noteFinish(facts, 'error');
}

/** `response.created` names the model and id; a terminal event tells how the response ended. */
const genAi: GenAiRules = {
  fromBody: (body, facts) => noteResponse(facts, isObject(body) ? (body as Json) : undefined),
  fromStreamEvent: (event, facts) => {
    const type = event.event;
    const wanted =
      type !== undefined ? type === 'response.created' || END_EVENTS.has(type) : event.data.includes('"response.');
    if (!wanted) return;
    const payload = parseObject(event.data);
    if (payload && (payload.type === 'response.created' || END_EVENTS.has(payload.type as string)))
      noteResponse(facts, payload.response as Json | undefined);
  },
  answerText: (body) => {
    if (!isObject(body) || !Array.isArray(body.output)) return '';
    return (body.output as Json[])
      .flatMap((item) => (Array.isArray(item?.content) ? (item.content as Json[]) : []))
      .map((part) => (part?.type === 'output_text' ? text(part.text) : ''))
      .join('');
  },
  inputMessages: (body) => ({
    system: body.instructions === undefined ? undefined : contentParts(body.instructions),
    messages:
      typeof body.input === 'string' ? [{ role: 'user', parts: contentParts(body.input) }] : roleMessages(body.input),
  }),
};

/** Responses (`POST /v1/responses`). */
export const responses: WireFormatRules = {
  format: 'responses',
  // Openings: `response.created` and `response.in_progress` (named events).
  judgeEarlyEvent: (event) => {
    if (event.event !== undefined && OPENINGS.has(event.event)) return 'opening';
    return parseObject(event.data) ? 'content' : 'malformed';
  },
  isErrorEvent: (event) => event.event === 'error' || event.event === 'response.failed',
  // Terminal: `response.completed`, `response.incomplete` or `response.failed`; a named event is judged
  // by its name alone (no scan of its data), data-only frames (some relays) by their type.
  isTerminalEvent: (event) => (event.event !== undefined ? END_EVENTS.has(event.event) : END.test(event.data)),
  usage,
  // Counted: `*.delta` events (output text, function arguments, reasoning summaries).
  textOf: (data) => {
    const payload = parseObject(data);
    if (!payload) return '';
    return typeof payload.type === 'string' && payload.type.endsWith('.delta') && !NOT_TEXT.has(payload.type)
      ? text(payload.delta)
      : '';
  },
  inBandError,
  errorEnvelope: 'completions-envelope',
  asksForStreamUsage: false,
  usageRequired: false,
  consumesTokens: true,
  namesEventsByType: true,
  stablePrefix,
  texts: responsesTexts,
  genAi,
};
