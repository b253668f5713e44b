import { errorBody } from '../error-body.ts';
import type { GatewayError } from '../gateway-errors.ts';
import type { SseEvent, TokenUsage, UsageExtractor } from '../../plugins/plugin-contract.ts';
import {
  count,
  hasUsageObject,
  isObject,
  parseObject,
  sseEvent,
  text,
  type Json,
  noteFinish,
  noteModel,
  roleMessages,
  type AnswerFacts,
  type GenAiRules,
  addText,
  itemsOf,
  NO_EVENT_TEXTS,
  type DeltaSlot,
  type EventTexts,
  type TextRules,
  type TextSlot,
} from './format-reading.ts';
import type { EarlyEvent, WireFormatRules } from './wire-format.ts';
import { requestTextReader, type RequestField } from './request-fields.ts';

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

/**
 * Every field of a Chat Completions request (OpenAI's `CreateChatCompletionRequest`), and whether the model
 * reads it: every message of every role (the client writes the assistant's turns too), names, tools and
 * their schemas, predicted output, the structured output's schema.
 */
export const CHAT_COMPLETIONS_REQUEST_FIELDS: readonly RequestField[] = [
  ['model', 'skip', 'chooses the model'],
  ['messages[].role', 'skip', "whose turn it is (every role's turns are read)"],
  ['messages[].content', 'text'],
  ['messages[].content[].text', 'text'],
  ['messages[].content[].refusal', 'text'],
  ['messages[].content[].image_url', 'skip', 'an image, by URL or data URL: not text'],
  ['messages[].content[].input_audio', 'skip', 'audio data: not text'],
  ['messages[].content[].file.file_data', 'skip', "a file's base64 data: not text"],
  ['messages[].content[].file.file_id', 'skip', 'an id'],
  ['messages[].content[].file.filename', 'text'],
  ['messages[].name', 'text'],
  ['messages[].refusal', 'text'],
  ['messages[].reasoning_content', 'text', "not in OpenAI's definition: the reasoning other vendors return, sent back"],
  ['messages[].reasoning', 'text', "not in OpenAI's definition: the reasoning other vendors return, sent back"],
  ['messages[].audio', 'skip', 'refers to earlier audio by id'],
  ['messages[].tool_call_id', 'skip', 'an id'],
  ['messages[].tool_calls[].id', 'skip', 'an id'],
  ['messages[].tool_calls[].function.name', 'text'],
  ['messages[].tool_calls[].function.arguments', 'json'],
  ['messages[].tool_calls[].custom.name', 'text'],
  ['messages[].tool_calls[].custom.input', 'text'],
  ['messages[].function_call.name', 'text'],
  ['messages[].function_call.arguments', 'json'],
  ['tools[].function.name', 'text'],
  ['tools[].function.description', 'text'],
  ['tools[].function.parameters', 'tree'],
  ['tools[].custom.name', 'text'],
  ['tools[].custom.description', 'text'],
  ['tools[].custom.format.grammar.definition', 'text'],
  ['functions[].name', 'text'],
  ['functions[].description', 'text'],
  ['functions[].parameters', 'tree'],
  ['tool_choice.function.name', 'text'],
  ['tool_choice.custom.name', 'text'],
  ['tool_choice.allowed_tools.tools[].function.name', 'text'],
  ['tool_choice.allowed_tools.tools[].custom.name', 'text'],
  ['tool_choice.allowed_tools.tools[]', 'skip', 'refers to tools by name: the names are read'],
  ['function_call.name', 'text'],
  ['prediction.content', 'text'],
  ['prediction.content[].text', 'text'],
  ['response_format.json_schema.name', 'text'],
  ['response_format.json_schema.description', 'text'],
  ['response_format.json_schema.schema', 'tree'],
  ['web_search_options.user_location.approximate.city', 'text'],
  ['web_search_options.user_location.approximate.region', 'text'],
  ['web_search_options.user_location.approximate.country', 'skip', 'an ISO country code'],
  ['web_search_options.user_location.approximate.timezone', 'skip', 'an IANA time zone'],
  ['audio', 'skip', 'chooses a voice'],
  ['stop', 'skip', 'ends the answer; the model does not read it'],
  ['metadata', 'skip', "the client's labels for stored completions; not sent to the model"],
  ['user', 'skip', 'identifies the end user to the provider; not sent to the model'],
  ['safety_identifier', 'skip', 'identifies the end user to the provider; not sent to the model'],
  ['prompt_cache_key', 'skip', 'a cache key'],
  ['moderation', 'skip', 'chooses a moderation model'],
  ['stream_options', 'skip', 'stream settings'],
];

/** Text fields of a message or a delta. */
const MESSAGE_FIELDS = ['content', 'refusal', 'reasoning_content', 'reasoning'] as const;

/**
 * Text, refusal, reasoning and tool-call arguments of a message (an answer's) or a delta (a chunk's), each with a
 * channel name.
 */
function messageTexts(
  message: unknown,
  path: readonly (string | number)[],
  into: (TextSlot & { channel: string })[],
  group: string,
): void {
  if (typeof message !== 'object' || message === null) return;
  const fields = message as Json;
  const push = (container: unknown, at: readonly (string | number)[], key: string, what: string, json = false) => {
    const found: TextSlot[] = [];
    addText(found, container, at, key);
    for (const slot of found) into.push({ ...slot, channel: `${group}|${what}`, ...(json ? { json } : {}) });
  };
  for (const field of MESSAGE_FIELDS) push(fields, path, field, field);
  push(fields.function_call, [...path, 'function_call'], 'arguments', 'function_call', true);
  itemsOf(fields.tool_calls).forEach((call, index) => {
    const channel = `tool ${String((call as Json | null)?.index ?? index)}`;
    push((call as Json | null)?.function, [...path, 'tool_calls', index, 'function'], 'arguments', channel, true);
  });
}

const request = requestTextReader(CHAT_COMPLETIONS_REQUEST_FIELDS);

function answer(body: unknown): TextSlot[] {
  const slots: (TextSlot & { channel: string })[] = [];
  itemsOf((body as Json | null)?.choices).forEach((choice, index) =>
    messageTexts((choice as Json | null)?.message, ['choices', index, 'message'], slots, `choice ${index}`),
  );
  return slots;
}

/**
 * Deltas per choice and field (content, refusal, reasoning, each tool call's arguments); a choice with a
 * `finish_reason` ends its group.
 */
function event(payload: Json): EventTexts {
  if (!Array.isArray(payload.choices)) return NO_EVENT_TEXTS;
  const deltas: DeltaSlot[] = [];
  const closes: string[] = [];
  payload.choices.forEach((choice: unknown, position) => {
    if (typeof choice !== 'object' || choice === null) return;
    const group = `choice ${String((choice as Json).index ?? position)}`;
    messageTexts((choice as Json).delta, ['choices', position, 'delta'], deltas, group);
    if (typeof (choice as Json).finish_reason === 'string') closes.push(group);
  });
  return deltas.length || closes.length ? { deltas, wholes: [], closes } : NO_EVENT_TEXTS;
}

/** An answer or a chunk of Chat Completions: its `choices` (a usage-only chunk has none in them), or an error. */
const knows = (value: unknown): boolean =>
  Array.isArray((value as Json | null)?.choices) || (value as Json | null)?.error !== undefined;

/** Chat Completions: the request fields the model reads; `choices[].message` and `.delta` (arguments as JSON text). */
export const chatCompletionsTexts: TextRules = { request, answer, event, knows };

type Counts = Record<string, unknown> | null | undefined;
type ChatChunk = { choices?: { delta?: Record<string, unknown>; finish_reason?: unknown }[]; usage?: unknown };

const ROLE_ONLY_KEYS = new Set(['role', 'content', 'refusal']);
const ERROR_CHUNK = /^\{\s*"error"\s*:/;
// Matched on the raw data, so that the relay does not parse every event a second time; a string value
// of `finish_reason` is a finish (the other chunks carry `null`).
const FINISH = /"finish_reason"\s*:\s*"/;

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
