import { errorBody } from '../error-body.ts';
import type { GatewayError } from '../gateway-errors.ts';
import type { TokenUsage, UsageExtractor } from '../../plugins/plugin-contract.ts';
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
  type AnswerFacts,
  type GenAiRules,
  addText,
  itemsOf,
  NO_EVENT_TEXTS,
  type EventTexts,
  type TextRules,
  type TextSlot,
} from './format-reading.ts';
import type { WireFormatRules } from './wire-format.ts';
import { requestTextReader, type RequestField } from './request-fields.ts';

/** Streamed deltas that are not text (base64 audio). */
const NOT_TEXT = new Set(['response.audio.delta']);
/** Streamed deltas and items' fields that are JSON text (a call's arguments). */
const JSON_DELTAS = new Set(['response.function_call_arguments.delta', 'response.mcp_call_arguments.delta']);

/** Parts of input content or tool output at `at`: text and file names; images and files themselves are not text. */
const parts = (at: string): RequestField[] => [
  [`${at}.text`, 'text'],
  [`${at}.filename`, 'text'],
  [`${at}.file_data`, 'skip', "a file's base64 data: not text"],
  [`${at}.file_id`, 'skip', 'an id'],
  [`${at}.file_url`, 'skip', 'a file by URL'],
  [`${at}.image_url`, 'skip', 'an image, by URL or data URL: not text'],
];

/** A function or custom tool at `at`: its name, description, schemas and grammar. */
const functionTool = (at: string): RequestField[] => [
  [`${at}.name`, 'text'],
  [`${at}.description`, 'text'],
  [`${at}.parameters`, 'tree'],
  [`${at}.output_schema`, 'tree'],
  [`${at}.format.definition`, 'text'],
];

/** Every kind of tool at `at`: what the model reads of each, and the settings, credentials and ids it does not. */
const tools = (at: string): RequestField[] => [
  ...functionTool(at),
  ...functionTool(`${at}.tools[]`),
  [`${at}.server_label`, 'text'],
  [`${at}.server_description`, 'text'],
  [`${at}.server_url`, 'skip', 'where the MCP server is'],
  [`${at}.authorization`, 'skip', 'a credential for the MCP server'],
  [`${at}.headers`, 'skip', 'headers for the MCP server: credentials'],
  [`${at}.tunnel_id`, 'skip', 'an id'],
  [`${at}.allowed_tools`, 'skip', "which of the MCP server's tools may be used, by name"],
  [`${at}.require_approval`, 'skip', 'which calls need approval, by tool name'],
  [`${at}.environment.skills[].name`, 'text'],
  [`${at}.environment.skills[].description`, 'text'],
  [`${at}.environment`, 'skip', "the shell's container: ids, paths, domains, secrets and base64 skill sources"],
  [`${at}.container`, 'skip', "the code interpreter's container: ids, domains and secrets"],
  [`${at}.filters`, 'skip', 'file search and web search filters'],
  [`${at}.vector_store_ids`, 'skip', 'ids'],
  [`${at}.input_image_mask`, 'skip', 'an image'],
  [`${at}.model`, 'skip', 'chooses the image model'],
  [`${at}.size`, 'skip', 'an image size'],
  [`${at}.user_location.city`, 'text'],
  [`${at}.user_location.region`, 'text'],
  [`${at}.user_location.country`, 'skip', 'an ISO country code'],
  [`${at}.user_location.timezone`, 'skip', 'an IANA time zone'],
];

/**
 * Every field of a Responses request (OpenAI's `ResponseCreateParams`), and whether the model reads it:
 * the instructions, every input item of every role and kind (the client sends back the model's own
 * messages, tool calls and reasoning too), tools and their schemas, prompt variables, the structured
 * output's schema. The model's earlier tool calls are read whole, as their arguments are.
 */
export const RESPONSES_REQUEST_FIELDS: readonly RequestField[] = [
  ['model', 'skip', 'chooses the model'],
  ['instructions', 'text'],
  ['input', 'text'],
  ['input[].content', 'text'],
  ...parts('input[].content[]'),
  ['input[].content[].refusal', 'text'],
  ['input[].content[].annotations[].title', 'text'],
  ['input[].content[].annotations[].filename', 'text'],
  ['input[].content[].annotations[].url', 'skip', 'a URL a citation points at'],
  ['input[].content[].annotations[].file_id', 'skip', 'an id'],
  ['input[].content[].annotations[].container_id', 'skip', 'an id'],
  ['input[].content[].logprobs', 'skip', "an earlier answer's token probabilities"],
  ['input[].id', 'skip', 'an id'],
  ['input[].call_id', 'skip', 'an id'],
  ['input[].approval_request_id', 'skip', 'an id'],
  ['input[].caller', 'skip', 'the program that made a call, by id'],
  ['input[].container_id', 'skip', 'an id'],
  ['input[].fingerprint', 'skip', 'opaque'],
  ['input[].encrypted_content', 'skip', 'opaque, encrypted'],
  ['input[].name', 'text'],
  ['input[].namespace', 'text'],
  ['input[].server_label', 'text'],
  ['input[].arguments', 'json'],
  ['input[].input', 'text'],
  ['input[].code', 'text'],
  ['input[].error', 'text'],
  ['input[].reason', 'text'],
  ['input[].output', 'text'],
  ...parts('input[].output[]'),
  ['input[].output[].stdout', 'text'],
  ['input[].output[].stderr', 'text'],
  ['input[].output.file_id', 'skip', 'a screenshot, by id'],
  ['input[].output.image_url', 'skip', 'a screenshot, by URL or data URL'],
  ['input[].outputs[].logs', 'text'],
  ['input[].outputs[].url', 'skip', 'an image the code made, by URL'],
  ['input[]{type=program_output}.result', 'text'],
  ['input[]{type=image_generation_call}.result', 'skip', "a generated image's base64 data"],
  ['input[].summary[].text', 'text'],
  ['input[].queries[]', 'text'],
  ['input[].results[].text', 'text'],
  ['input[].results[].filename', 'text'],
  ['input[].results[].file_id', 'skip', 'an id'],
  ['input[].results[].attributes', 'skip', "a file's attributes for search filters"],
  ['input[].action.text', 'text'],
  ['input[].action.keys[]', 'text'],
  ['input[].actions[].text', 'text'],
  ['input[].actions[].keys[]', 'text'],
  ['input[].action.command[]', 'text'],
  ['input[].action.commands[]', 'text'],
  ['input[].action.env.*', 'text'],
  ['input[].action.user', 'text'],
  ['input[].action.working_directory', 'text'],
  ['input[].action.query', 'text'],
  ['input[].action.queries[]', 'text'],
  ['input[].action.pattern', 'text'],
  ['input[].action.url', 'text'],
  ['input[].action.sources[].url', 'text'],
  ['input[].operation.diff', 'text'],
  ['input[].operation.path', 'text'],
  ['input[].pending_safety_checks[].message', 'text'],
  ['input[].pending_safety_checks[].code', 'skip', 'a code'],
  ['input[].pending_safety_checks[].id', 'skip', 'an id'],
  ['input[].acknowledged_safety_checks[].message', 'text'],
  ['input[].acknowledged_safety_checks[].code', 'skip', 'a code'],
  ['input[].acknowledged_safety_checks[].id', 'skip', 'an id'],
  ['input[].environment.skills[].name', 'text'],
  ['input[].environment.skills[].description', 'text'],
  ['input[].environment', 'skip', "the shell's container or local paths"],
  ...tools('input[].tools[]'),
  ['input[].tools[].input_schema', 'tree'],
  ['input[].tools[].annotations', 'skip', "hints about an MCP tool's behaviour for the client"],
  ...tools('tools[]'),
  ['tool_choice.name', 'text'],
  ['tool_choice.server_label', 'text'],
  ['tool_choice.tools[].name', 'text'],
  ['tool_choice.tools[].server_label', 'text'],
  ['tool_choice.tools[]', 'skip', 'refers to tools by name: the names are read'],
  ['text.format.name', 'text'],
  ['text.format.description', 'text'],
  ['text.format.schema', 'tree'],
  ['prompt.variables.*', 'text'],
  ...parts('prompt.variables.*'),
  ['prompt.id', 'skip', 'a stored prompt, by id'],
  ['prompt.version', 'skip', "a stored prompt's version"],
  ['previous_response_id', 'skip', 'an id'],
  ['conversation', 'skip', 'a conversation, by id'],
  ['context_management', 'skip', 'settings'],
  ['reasoning', 'skip', 'settings'],
  ['metadata', 'skip', "the client's labels for stored responses; not sent to the model"],
  ['user', 'skip', 'identifies the end user to the provider; not sent to the model'],
  ['safety_identifier', 'skip', 'identifies the end user to the provider; not sent to the model'],
  ['prompt_cache_key', 'skip', 'a cache key'],
  ['moderation', 'skip', 'chooses a moderation model'],
];

const request = requestTextReader(RESPONSES_REQUEST_FIELDS);

/**
 * An output item's texts: a message's output text and refusals, a tool call's arguments or input, a reasoning summary.
 */
function itemTexts(item: unknown, path: readonly (string | number)[], into: TextSlot[]): void {
  const fields = item as Json | null;
  if (!fields || typeof fields !== 'object') return;
  itemsOf(fields.content).forEach((part, index) => {
    addText(into, part, [...path, 'content', index], 'text');
    addText(into, part, [...path, 'content', index], 'refusal');
  });
  itemsOf(fields.summary).forEach((part, index) => addText(into, part, [...path, 'summary', index], 'text'));
  const calls: TextSlot[] = [];
  addText(calls, fields, path, 'arguments');
  for (const slot of calls) into.push({ ...slot, json: true });
  addText(into, fields, path, 'input');
}

function answer(body: unknown): TextSlot[] {
  const slots: TextSlot[] = [];
  itemsOf((body as Json | null)?.output).forEach((item, index) => itemTexts(item, ['output', index], slots));
  return slots;
}

/** A delta's or done event's group: its kind, item and part (`response.output_text msg_1 0`). */
const groupOf = (kind: string, payload: Json): string =>
  `${kind} ${String(payload.item_id ?? payload.output_index)} ${String(payload.content_index ?? payload.summary_index ?? '')}`;

/**
 * `*.delta` events with a string `delta` (output text, arguments, reasoning summaries; not audio), one
 * channel per item and part; a `*.done` ends its group and repeats the whole text, as do
 * `content_part`, `output_item` and the response's own events.
 */
function event(payload: Json): EventTexts {
  const type = payload.type;
  if (typeof type !== 'string') return NO_EVENT_TEXTS;
  if (type.endsWith('.delta')) {
    if (NOT_TEXT.has(type) || typeof payload.delta !== 'string' || payload.delta === '') return NO_EVENT_TEXTS;
    const channel = `${groupOf(type.slice(0, -'.delta'.length), payload)}|text`;
    const json = JSON_DELTAS.has(type) ? { json: true } : {};
    return { deltas: [{ path: ['delta'], text: payload.delta, channel, ...json }], wholes: [], closes: [] };
  }
  const wholes: TextSlot[] = [];
  for (const key of ['text', 'refusal']) addText(wholes, payload, [], key);
  const calls: TextSlot[] = [];
  addText(calls, payload, [], 'arguments');
  for (const slot of calls) wholes.push({ ...slot, json: true });
  if (payload.part !== undefined) {
    addText(wholes, payload.part, ['part'], 'text');
    addText(wholes, payload.part, ['part'], 'refusal');
  }
  if (payload.item !== undefined) itemTexts(payload.item, ['item'], wholes);
  itemsOf((payload.response as Json | null)?.output).forEach((item, index) =>
    itemTexts(item, ['response', 'output', index], wholes),
  );
  const closes = type.endsWith('.done') ? [groupOf(type.slice(0, -'.done'.length), payload)] : [];
  return wholes.length || closes.length ? { deltas: [], wholes, closes } : NO_EVENT_TEXTS;
}

/** Responses: its request fields the model reads; output items and their streamed deltas (arguments as JSON text). */
/** A response or an event of Responses: a response names its `object`, an event its `type`. */
const knows = (value: unknown): boolean =>
  typeof (value as Json | null)?.type === 'string' || (value as Json | null)?.object === 'response';

export const responsesTexts: TextRules = { request, answer, event, knows };

type Counts = Record<string, unknown> | null | undefined;

const OPENINGS = new Set(['response.created', 'response.in_progress']);
const END_EVENTS = new Set(['response.completed', 'response.incomplete', 'response.failed']);
const END = /"type"\s*:\s*"response\.(completed|incomplete|failed)"/;
const TERMINAL_RESPONSE_EVENTS = ['response.completed', 'response.incomplete', 'response.failed'];

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
