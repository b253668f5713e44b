import type { SseEvent, TokenUsage, UsageExtractor, WireFormat } from '../plugins/plugin-contract.ts';

type Counts = Record<string, unknown> | null | undefined;

const count = (value: unknown): number => (typeof value === 'number' && Number.isFinite(value) && value > 0 ? Math.round(value) : 0);
const isObject = (value: unknown): value is Record<string, unknown> => typeof value === 'object' && value !== null;

function parse(data: string): Record<string, unknown> | undefined {
  try {
    const value: unknown = JSON.parse(data);
    return isObject(value) ? value : undefined;
  } catch {
    return undefined;
  }
}

/** Chat Completions: `prompt_tokens` already includes `prompt_tokens_details.cached_tokens`. */
export function chatCompletionsTokens(usage: Counts): TokenUsage | undefined {
  if (!isObject(usage) || typeof usage.prompt_tokens !== 'number') return undefined;
  const details = usage.prompt_tokens_details as Counts;
  return { inputTokens: count(usage.prompt_tokens), outputTokens: count(usage.completion_tokens), cachedTokens: count(details?.cached_tokens) };
}

/** Responses: `input_tokens` already includes `input_tokens_details.cached_tokens`. */
export function responsesTokens(usage: Counts): TokenUsage | undefined {
  if (!isObject(usage) || typeof usage.input_tokens !== 'number') return undefined;
  const details = usage.input_tokens_details as Counts;
  return { inputTokens: count(usage.input_tokens), outputTokens: count(usage.output_tokens), cachedTokens: count(details?.cached_tokens) };
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

/**
 * Whether JSON text has a `"usage"` key whose value is an object: a cheap scan, so that the chunks
 * of a stream without usage (`"usage":null`, or none at all) are never parsed.
 */
export function hasUsageObject(data: string): boolean {
  for (let at = data.indexOf('"usage"'); at !== -1; at = data.indexOf('"usage"', at + 7)) {
    let index = at + 7;
    while (isBlank(data.charCodeAt(index))) index += 1;
    if (data.charCodeAt(index) !== 0x3a /* : */) continue;
    index += 1;
    while (isBlank(data.charCodeAt(index))) index += 1;
    if (data.charCodeAt(index) === 0x7b /* { */) return true;
  }
  return false;
}

const isBlank = (code: number): boolean => code === 0x20 || code === 0x0a || code === 0x0d || code === 0x09;

/**
 * Chat Completions. A stream carries usage only in the `include_usage` chunk (`choices: []`, before
 * `[DONE]`; every other chunk says `"usage": null`); upstreams that send running totals on every
 * chunk are read the same way, since the last chunk with usage wins and nothing is summed.
 */
const chatCompletions: UsageExtractor = {
  fromBody: (body) => chatCompletionsTokens((body as { usage?: Counts } | null)?.usage),
  fromStreamEvent: (seen, event) => {
    if (!hasUsageObject(event.data)) return seen;
    return chatCompletionsTokens(parse(event.data)?.usage as Counts) ?? seen;
  },
};

const TERMINAL_RESPONSE_EVENTS = ['response.completed', 'response.incomplete', 'response.failed'];

/** Responses: only the terminal events (`response.completed`, `.incomplete`, `.failed`) carry `response.usage`. */
const responses: UsageExtractor = {
  fromBody: (body) => responsesTokens((body as { usage?: Counts } | null)?.usage),
  fromStreamEvent: (seen, event) => {
    const type = event.event;
    // Named events are judged by name; data-only frames (some relays) by a substring scan.
    if (type?.startsWith('response.') ? !TERMINAL_RESPONSE_EVENTS.includes(type) : !TERMINAL_RESPONSE_EVENTS.some((name) => event.data.includes(`"${name}"`))) return seen;
    const payload = parse(event.data);
    if (!payload || !TERMINAL_RESPONSE_EVENTS.includes(payload.type as string)) return seen;
    return responsesTokens((payload.response as { usage?: Counts } | undefined)?.usage) ?? seen;
  },
};

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
 * Messages streams: `message_start` gives the input and cache counts; each `message_delta` carries
 * CUMULATIVE totals, so its non-null fields overwrite (never add to) what was seen.
 */
function messagesStreamEvent(seen: TokenUsage | undefined, event: SseEvent): TokenUsage | undefined {
  const type = event.event;
  if (type !== undefined && type !== 'message_start' && type !== 'message_delta') return seen;
  if (type === undefined && !event.data.includes('"message_')) return seen;
  const payload = parse(event.data);
  let usage: Counts;
  if (payload?.type === 'message_start') usage = (payload.message as { usage?: Counts } | undefined)?.usage;
  else if (payload?.type === 'message_delta') usage = payload.usage as Counts;
  if (!isObject(usage)) return seen;
  const before = (seen && inputPartsOf.get(seen)) ?? (seen ? { input: seen.inputTokens - seen.cachedTokens, creation: 0, read: seen.cachedTokens } : { input: 0, creation: 0, read: 0 });
  const pick = (value: unknown, previous: number) => (value == null ? previous : count(value));
  const parts = {
    input: pick(usage.input_tokens, before.input),
    creation: pick(usage.cache_creation_input_tokens, before.creation),
    read: pick(usage.cache_read_input_tokens, before.read),
  };
  return messagesUsage(parts, pick(usage.output_tokens, seen?.outputTokens ?? 0));
}

const messages: UsageExtractor = {
  fromBody: (body) => messagesTokens((body as { usage?: Counts } | null)?.usage),
  fromStreamEvent: messagesStreamEvent,
};

/** count_tokens answers hold a count, not usage: the request consumed nothing and is recorded with zero tokens. */
const countTokens: UsageExtractor = { fromBody: () => undefined, fromStreamEvent: (seen) => seen };

/** The core's extractor per wire format; a plugin may declare its own for its models. */
export const standardExtractors: Readonly<Record<WireFormat, UsageExtractor>> = {
  'chat-completions': chatCompletions,
  responses,
  messages,
  'count-tokens': countTokens,
};
