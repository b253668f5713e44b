import { errorBody } from '../error-body.ts';
import type { GatewayError } from '../gateway-errors.ts';
import type { SseEvent, TokenUsage, UsageExtractor } from '../../plugins/plugin-contract.ts';
import { count, hasUsageObject, isObject, parseObject, sseEvent, text, type Json } from './event-data.ts';
import type { EarlyEvent, WireFormatRules } from './wire-format.ts';
import { chatCompletionsTexts } from './chat-completions-texts.ts';
import { noteFinish, noteModel, roleMessages, type AnswerFacts, type GenAiRules } from './genai-facts.ts';

type Counts = Record<string, unknown> | null | undefined;
type ChatChunk = { choices?: { delta?: Record<string, unknown>; finish_reason?: unknown }[]; usage?: unknown };

const ROLE_ONLY_KEYS = new Set(['role', 'content', 'refusal']);
const ERROR_CHUNK = /^\{\s*"error"\s*:/;
// Matched on the raw data, so that the relay does not parse every event a second time; a string value
// of `finish_reason` is a finish (the other chunks carry `null`).
const FINISH = /"finish_reason"\s*:\s*"/;

/**
 * An opening chunk is one whose deltas carry nothing but a role (and empty content); `[DONE]` is
 * content (it ends a stream that carried nothing).
 */
function judgeEarlyEvent(event: SseEvent): EarlyEvent {
  if (event.data === '[DONE]') return 'content';
  const parsed = parseObject(event.data);
  if (!parsed) return 'malformed';
  const chunk = parsed as ChatChunk;
  if (!Array.isArray(chunk.choices) || chunk.choices.length === 0 || chunk.usage) return 'content';
  const opening = chunk.choices.every(
    (choice) =>
      choice.finish_reason == null &&
      Object.entries(choice.delta ?? {}).every(
        ([key, value]) => ROLE_ONLY_KEYS.has(key) && (key === 'role' || value === null || value === ''),
      ),
  );
  return opening ? 'opening' : 'content';
}

/** Chat Completions: `prompt_tokens` already includes `prompt_tokens_details.cached_tokens`. */
export function chatCompletionsTokens(usage: Counts): TokenUsage | undefined {
  if (!isObject(usage) || typeof usage.prompt_tokens !== 'number') return undefined;
  const details = usage.prompt_tokens_details as Counts;
  return {
    inputTokens: count(usage.prompt_tokens),
    outputTokens: count(usage.completion_tokens),
    cachedTokens: count(details?.cached_tokens),
  };
}

/**
 * A stream carries usage only in the `include_usage` chunk (`choices: []`, before `[DONE]`; every other
 * chunk says `"usage": null`); upstreams that send running totals on every chunk are read the same way,
 * since the last chunk with usage wins and nothing is summed.
 */
const usage: UsageExtractor = {
  fromBody: (body) => chatCompletionsTokens((body as { usage?: Counts } | null)?.usage),
  fromStreamEvent: (seen, event) => {
    if (!hasUsageObject(event.data)) return seen;
    return chatCompletionsTokens(parseObject(event.data)?.usage as Counts) ?? seen;
  },
};

/** Counted: `choices[].delta` content, reasoning, refusal and tool call names and arguments. */
function textOf(data: string): string {
  const payload = parseObject(data);
  if (!payload) return '';
  let out = '';
  for (const choice of Array.isArray(payload.choices) ? (payload.choices as Json[]) : []) {
    const delta = (choice?.delta ?? {}) as Json;
    out +=
      text(delta.content) +
      text(delta.reasoning_content) +
      text(delta.reasoning) +
      text(delta.refusal) +
      text(delta.function_call?.name) +
      text(delta.function_call?.arguments);
    for (const call of Array.isArray(delta.tool_calls) ? (delta.tool_calls as Json[]) : [])
      out += text(call?.function?.name) + text(call?.function?.arguments);
  }
  return out;
}

const SYSTEM_ROLES = new Set(['system', 'developer']);

/** The leading system and developer messages, and the first message after them. */
function stablePrefix(body: Record<string, unknown>): readonly unknown[] {
  const messages = body.messages;
  if (!Array.isArray(messages)) return [];
  let end = 0;
  while (end < messages.length && SYSTEM_ROLES.has((messages[end] as { role?: unknown } | null)?.role as string))
    end += 1;
  return messages.slice(0, end + 1);
}

/**
 * `data: {"error":{message,type,param,code}}` (openai-node throws on a chunk with a top-level
 * `error`), with the gateway's `detail`.
 */
export function completionsErrorChunk(error: GatewayError): Buffer {
  return sseEvent(undefined, errorBody(error, 'completions-envelope'));
}

function noteChoices(facts: AnswerFacts, payload: Json): void {
  for (const choice of Array.isArray(payload.choices) ? (payload.choices as Json[]) : [])
    noteFinish(facts, choice?.finish_reason);
}

/** Every chunk names the model: the first is parsed for it, then only the chunks that finish a choice. */
const genAi: GenAiRules = {
  fromBody: (body, facts) => {
    if (!isObject(body)) return;
    noteModel(facts, body);
    noteChoices(facts, body);
  },
  fromStreamEvent: (event, facts) => {
    const first = facts.model === undefined;
    if (!first && !FINISH.test(event.data)) return;
    const payload = parseObject(event.data);
    if (!payload) return;
    noteModel(facts, payload);
    noteChoices(facts, payload);
  },
  answerText: (body) => {
    if (!isObject(body) || !Array.isArray(body.choices)) return '';
    return (body.choices as Json[])
      .map((choice) => text(choice?.message?.content) + text(choice?.message?.refusal))
      .join('');
  },
  inputMessages: (body) => {
    const all = roleMessages(body.messages);
    const system = all.filter((message) => SYSTEM_ROLES.has(message.role)).flatMap((message) => message.parts);
    return { system, messages: all.filter((message) => !SYSTEM_ROLES.has(message.role)) };
  },
};

/** Chat Completions (`POST /v1/chat/completions`). */
export const chatCompletions: WireFormatRules = {
  format: 'chat-completions',
  judgeEarlyEvent,
  isErrorEvent: (event) => event.event === 'error' || event.data.startsWith('{"error"') || ERROR_CHUNK.test(event.data),
  // Terminal: `[DONE]` or a chunk with a `finish_reason`.
  isTerminalEvent: (event) => event.data === '[DONE]' || FINISH.test(event.data),
  usage,
  textOf,
  inBandError: completionsErrorChunk,
  errorEnvelope: 'completions-envelope',
  asksForStreamUsage: true,
  usageRequired: true,
  consumesTokens: true,
  namesEventsByType: false,
  stablePrefix,
  texts: chatCompletionsTexts,
  genAi,
};
