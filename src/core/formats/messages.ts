import { errorBody } from '../error-body.ts';
import type { SseEvent, TokenUsage, UsageExtractor } from '../../plugins/plugin-contract.ts';
import {
  count,
  isObject,
  parseObject,
  sseEvent,
  text,
  type Json,
  contentParts,
  noteFinish,
  noteModel,
  roleMessages,
  type GenAiRules,
  addText,
  itemsOf,
  NO_EVENT_TEXTS,
  stringLeaves,
  type DeltaSlot,
  type EventTexts,
  type TextRules,
  type TextSlot,
} from './format-reading.ts';
import type { EarlyEvent, WireFormatRules } from './wire-format.ts';
import { requestTextReader, type RequestField } from './request-fields.ts';

/** A text block at `at`: the text, and the citations of one sent back (quotes and titles, not where they point). */
const textBlock = (at: string): RequestField[] => [
  [`${at}.text`, 'text'],
  [`${at}.citations[].cited_text`, 'text'],
  [`${at}.citations[].document_title`, 'text'],
  [`${at}.citations[].title`, 'text'],
  [`${at}.citations[].url`, 'skip', 'a URL a citation points at'],
  [`${at}.citations[].source`, 'skip', 'where a cited search result came from'],
  [`${at}.citations[].encrypted_index`, 'skip', 'opaque, encrypted'],
];

/** The sources at `at` that are not text: base64 data (an image, a PDF), a URL, a file id. */
const binarySources = (at: string): RequestField[] => [
  [`${at}.source{type=base64}`, 'skip', "an image's or a PDF's base64 data: not text"],
  [`${at}.source{type=url}`, 'skip', 'an image or a document by URL'],
  [`${at}.source{type=file}`, 'skip', 'an image or a document by file id'],
];

/** A document block at `at`: its title and context, and a source of plain text or of content blocks. */
const documentBlock = (at: string): RequestField[] => [
  [`${at}.title`, 'text'],
  [`${at}.context`, 'text'],
  [`${at}.source{type=text}.data`, 'text'],
  [`${at}.source.content`, 'text'],
  ...textBlock(`${at}.source.content[]`),
  ...binarySources(`${at}.source.content[]`),
  ...binarySources(at),
];

/**
 * A list of text, image, document and search result blocks at `at` (each item): a search result's own
 * content is a list of text blocks at `<at>.content[]`, read by the caller.
 */
const blocks = (at: string): RequestField[] => [
  ...textBlock(at),
  ...documentBlock(at),
  [`${at}{type=search_result}.source`, 'skip', 'where a search result came from: a URL or an identifier'],
];

/**
 * Every field of a Messages request (Anthropic's `MessageCreateParams`, and count_tokens'), and whether
 * the model reads it: the system prompt, every turn of either role (the client writes the assistant's
 * too) with all its blocks, tools and their schemas.
 */
export const MESSAGES_REQUEST_FIELDS: readonly RequestField[] = [
  ['model', 'skip', 'chooses the model'],
  ['system', 'text'],
  ...textBlock('system[]'),
  ['messages[].content', 'text'],
  ...blocks('messages[].content[]'),
  ['messages[].content[].thinking', 'text'],
  ['messages[].content[].signature', 'skip', 'opaque, signs a thinking block'],
  ['messages[].content[]{type=redacted_thinking}.data', 'skip', 'a redacted thinking block: opaque, encrypted'],
  ['messages[].content[].id', 'skip', 'an id'],
  ['messages[].content[].name', 'text'],
  ['messages[].content[].input', 'tree'],
  ['messages[].content[].caller', 'skip', 'the tool call that made this one, by id'],
  ['messages[].content[].tool_use_id', 'skip', 'an id'],
  ['messages[].content[].toolset_name', 'text'],
  ['messages[].content[]{type=container_upload}.file_id', 'skip', 'an id'],
  // A tool result: a string, or blocks (a search result's own content blocks at the same place).
  ['messages[].content[].content', 'text'],
  ...blocks('messages[].content[].content[]'),
  ...textBlock('messages[].content[].content[].content[]'),
  ['messages[].content[].content[].tool_name', 'text'],
  ['messages[].content[].content[].url', 'skip', "a search result's URL"],
  ['messages[].content[].content[].encrypted_content', 'skip', 'opaque, encrypted'],
  ['messages[].content[].content[].page_age', 'skip', 'a date'],
  ['messages[].content[].content[].tabs[].title', 'text'],
  ['messages[].content[].content[].tabs[].tab_id', 'skip', 'an id'],
  ['messages[].content[].content[].tabs[].url', 'skip', 'a URL'],
  ['messages[].content[].content[].state_changes[].error', 'text'],
  ['messages[].content[].content[].state_changes[]', 'skip', "ids, paths and URLs of a browser's downloads and tabs"],
  // Server tools' results: code execution, text editor, tool search, web fetch (a document).
  ['messages[].content[].content.stdout', 'text'],
  ['messages[].content[].content.stderr', 'text'],
  ['messages[].content[].content.encrypted_stdout', 'skip', 'opaque, encrypted'],
  ['messages[].content[].content.content[].file_id', 'skip', 'an id'],
  ['messages[].content[].content.lines[]', 'text'],
  ['messages[].content[].content.error_message', 'text'],
  ['messages[].content[].content.content', 'text'],
  ...documentBlock('messages[].content[].content.content'),
  ['messages[].content[].content.tool_references[].tool_name', 'text'],
  ['messages[].content[].content.retrieved_at', 'skip', 'a date'],
  ['messages[].content[].content.url', 'skip', "a fetched page's URL"],
  ['tools[].name', 'text'],
  ['tools[].description', 'text'],
  ['tools[].input_schema', 'tree'],
  ['tools[].input_examples', 'tree'],
  ['tools[].user_location.city', 'text'],
  ['tools[].user_location.region', 'text'],
  ['tools[].user_location.country', 'skip', 'an ISO country code'],
  ['tools[].user_location.timezone', 'skip', 'an IANA time zone'],
  ['tools[].allowed_domains', 'skip', 'domains a server tool may reach'],
  ['tools[].blocked_domains', 'skip', 'domains a server tool may not reach'],
  ['tools[].url_sources', 'skip', "which tools' results a server tool may fetch from, by name"],
  ['tool_choice.name', 'text'],
  ['output_config.format.schema', 'tree'],
  ['thinking', 'skip', 'settings'],
  ['stop_sequences', 'skip', 'ends the answer; the model does not read it'],
  ['metadata', 'skip', 'identifies the end user to the provider; not sent to the model'],
  ['container', 'skip', 'a code execution container and its skills, by id'],
  ['diagnostics', 'skip', 'refers to an earlier message by id'],
  ['inference_geo', 'skip', 'where the model runs'],
  ['user_profile_id', 'skip', 'an id'],
  ['workspace_id', 'skip', 'an id'],
];

const request = requestTextReader(MESSAGES_REQUEST_FIELDS);

/** A content block's texts: text, thinking, and every string of a tool call's input. */
function contentBlock(block: unknown, path: readonly (string | number)[], into: TextSlot[]): void {
  addText(into, block, path, 'text');
  addText(into, block, path, 'thinking');
  if ((block as Json | null)?.input !== undefined) stringLeaves((block as Json).input, [...path, 'input'], into);
}

function answer(body: unknown): TextSlot[] {
  const slots: TextSlot[] = [];
  itemsOf((body as Json | null)?.content).forEach((block, index) => contentBlock(block, ['content', index], slots));
  return slots;
}

/**
 * `content_block_delta` text, JSON input and thinking (one channel per content block), the text a
 * `content_block_start` opens with; `content_block_stop` ends the block.
 */
function event(payload: Json): EventTexts {
  const group = `block ${String(payload.index)}`;
  if (payload.type === 'content_block_delta') {
    const deltas: DeltaSlot[] = [];
    for (const field of ['text', 'partial_json', 'thinking']) {
      const found: TextSlot[] = [];
      addText(found, payload.delta, ['delta'], field);
      const json = field === 'partial_json' ? { json: true } : {};
      for (const slot of found) deltas.push({ ...slot, channel: `${group}|text`, ...json });
    }
    return deltas.length ? { deltas, wholes: [], closes: [] } : NO_EVENT_TEXTS;
  }
  if (payload.type === 'content_block_start') {
    const found: TextSlot[] = [];
    addText(found, payload.content_block, ['content_block'], 'text');
    addText(found, payload.content_block, ['content_block'], 'thinking');
    const wholes: TextSlot[] = [];
    if ((payload.content_block as Json | null)?.input !== undefined)
      stringLeaves((payload.content_block as Json).input, ['content_block', 'input'], wholes);
    return found.length || wholes.length
      ? { deltas: found.map((slot) => ({ ...slot, channel: `${group}|text` })), wholes, closes: [] }
      : NO_EVENT_TEXTS;
  }
  if (payload.type === 'content_block_stop') return { deltas: [], wholes: [], closes: [group] };
  if (payload.type === 'message_start') {
    const wholes: TextSlot[] = [];
    itemsOf((payload.message as Json | null)?.content).forEach((block, index) =>
      contentBlock(block, ['message', 'content', index], wholes),
    );
    return wholes.length ? { deltas: [], wholes, closes: [] } : NO_EVENT_TEXTS;
  }
  return NO_EVENT_TEXTS;
}

/** Messages (and count_tokens, whose requests are Messages requests): the request fields the model reads; blocks. */
/** A message or an event of Messages: each names its `type` (`message`, `message_start`, `ping`, `error`, ...). */
const knows = (value: unknown): boolean => typeof (value as Json | null)?.type === 'string';

export const messagesTexts: TextRules = { request, answer, event, knows };

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
