import { errorBody } from '../error-body.ts';
import type { SseEvent, TokenUsage, UsageExtractor } from '../../plugins/plugin-contract.ts';
import { count, isObject, parseObject, sseEvent, text, type Json } from './event-data.ts';
import type { EarlyEvent, WireFormatRules } from './wire-format.ts';
import { messagesTexts } from './messages-texts.ts';
import { contentParts, noteFinish, noteModel, roleMessages, type GenAiRules } from './genai-facts.ts';

type Counts = Record<string, unknown> | null | undefined;

const OPENINGS = new Set(['message_start', 'ping']);
const STOP = /"type"\s*:\s*"message_stop"/;

/** Openings: `message_start` and `ping`, named or (data-only frames) by their `type`. */
function judgeEarlyEvent(event: SseEvent): EarlyEvent {
  if (event.event !== undefined && OPENINGS.has(event.event)) return 'opening';
  const parsed = parseObject(event.data);
  if (!parsed) return 'malformed';
  return event.event === undefined && OPENINGS.has((parsed as { type?: string }).type ?? '') ? 'opening' : 'content';
}

/** Messages: the three input counts are separate; all prompt tokens are their sum. */
export function messagesTokens(usage: Counts): TokenUsage | undefined {
  if (!isObject(usage) || typeof usage.input_tokens !== 'number') return undefined;
  const cacheRead = count(usage.cache_read_input_tokens);
  return {
    inputTokens: count(usage.input_tokens) + count(usage.cache_creation_input_tokens) + cacheRead,
    outputTokens: count(usage.output_tokens),
    cachedTokens: cacheRead,
  };
}

interface InputParts {
  readonly input: number;
  readonly creation: number;
  readonly read: number;
}

// The three separate input counts behind each Messages usage value the stream reducer returns, so a
// later delta can overwrite any one of them.
const inputPartsOf = new WeakMap<TokenUsage, InputParts>();

function messagesUsage(parts: InputParts, outputTokens: number): TokenUsage {
  const usage = { inputTokens: parts.input + parts.creation + parts.read, outputTokens, cachedTokens: parts.read };
  inputPartsOf.set(usage, parts);
  return usage;
}

/**
 * Streams: `message_start` gives the input and cache counts; each `message_delta` carries CUMULATIVE
 * totals, so its non-null fields overwrite (never add to) what was seen.
 */
function messagesStreamEvent(seen: TokenUsage | undefined, event: SseEvent): TokenUsage | undefined {
  const type = event.event;
  if (type !== undefined && type !== 'message_start' && type !== 'message_delta') return seen;
  if (type === undefined && !event.data.includes('"message_')) return seen;
  const payload = parseObject(event.data);
  let usage: Counts;
  if (payload?.type === 'message_start') usage = (payload.message as { usage?: Counts } | undefined)?.usage;
  else if (payload?.type === 'message_delta') usage = payload.usage as Counts;
  if (!isObject(usage)) return seen;
  const before =
    (seen && inputPartsOf.get(seen)) ??
    (seen
      ? { input: seen.inputTokens - seen.cachedTokens, creation: 0, read: seen.cachedTokens }
      : { input: 0, creation: 0, read: 0 });
  const pick = (value: unknown, previous: number) => (value == null ? previous : count(value));
  const parts = {
    input: pick(usage.input_tokens, before.input),
    creation: pick(usage.cache_creation_input_tokens, before.creation),
    read: pick(usage.cache_read_input_tokens, before.read),
  };
  return messagesUsage(parts, pick(usage.output_tokens, seen?.outputTokens ?? 0));
}

const usage: UsageExtractor = {
  fromBody: (body) => messagesTokens((body as { usage?: Counts } | null)?.usage),
  fromStreamEvent: messagesStreamEvent,
};

/** `system` and the first message (also the prefix of a count_tokens body, which has the same shape). */
export function messagesPrefix(body: Record<string, unknown>): readonly unknown[] {
  const first = Array.isArray(body.messages) ? (body.messages as unknown[])[0] : undefined;
  return [body.system, first].filter((part) => part !== undefined);
}

/** `message_start` names the model and id, `message_delta` the stop reason. */
export const messagesGenAi: GenAiRules = {
  fromBody: (body, facts) => {
    if (!isObject(body)) return;
    noteModel(facts, body);
    noteFinish(facts, body.stop_reason);
  },
  fromStreamEvent: (event, facts) => {
    const type = event.event;
    if (type !== undefined ? type !== 'message_start' && type !== 'message_delta' : !event.data.includes('"message_'))
      return;
    const payload = parseObject(event.data);
    if (payload?.type === 'message_start') noteModel(facts, payload.message as Json | undefined);
    else if (payload?.type === 'message_delta') noteFinish(facts, (payload.delta as Json | undefined)?.stop_reason);
  },
  answerText: (body) => {
    if (!isObject(body) || !Array.isArray(body.content)) return '';
    return (body.content as Json[]).map((block) => (block?.type === 'text' ? text(block.text) : '')).join('');
  },
  inputMessages: (body) => ({
    system: body.system === undefined ? undefined : contentParts(body.system),
    messages: roleMessages(body.messages),
  }),
};

/** Messages (`POST /v1/messages`). */
export const messages: WireFormatRules = {
  format: 'messages',
  judgeEarlyEvent,
  isErrorEvent: (event) => event.event === 'error',
  // Terminal: `message_stop`; a named event is judged by its name alone (no scan of its data),
  // data-only frames (some relays) by their type.
  isTerminalEvent: (event) => (event.event !== undefined ? event.event === 'message_stop' : STOP.test(event.data)),
  usage,
  // Counted: `content_block_delta` text, tool input JSON and thinking.
  textOf: (data) => {
    const payload = parseObject(data);
    if (!payload || payload.type !== 'content_block_delta') return '';
    const delta = (payload.delta ?? {}) as Json;
    return text(delta.text) + text(delta.partial_json) + text(delta.thinking);
  },
  // `event: error` + `{"type":"error","error":{type,message}}`, as Anthropic sends mid-stream, with the gateway's
  // `detail`.
  inBandError: (error) => sseEvent('error', errorBody(error, 'messages-envelope')),
  errorEnvelope: 'messages-envelope',
  asksForStreamUsage: false,
  usageRequired: false,
  consumesTokens: true,
  namesEventsByType: true,
  stablePrefix: messagesPrefix,
  texts: messagesTexts,
  genAi: messagesGenAi,
};
