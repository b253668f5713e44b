import { randomBytes } from 'node:crypto';
import { schemaInstance } from './schema-instance.ts';

export type Profile = 'standard' | 'running-usage' | 'empty-function-call';
export const PROFILES: readonly Profile[] = ['standard', 'running-usage', 'empty-function-call'];

/** The usage an answer carried, normalised: `inputTokens` counts every prompt token, cached included. */
export interface ReportedUsage {
  readonly inputTokens: number;
  readonly outputTokens: number;
  readonly cachedTokens: number;
}

/** A tool the request offers, as a model sees it: its name and the JSON schema of its arguments. */
export interface OfferedTool {
  readonly name: string;
  readonly parameters: unknown;
  /** A Chat Completions legacy `functions` entry, answered with `function_call` instead of `tool_calls`. */
  readonly legacy?: boolean;
}

/**
 * What a request asks of the model, read by its wire format: call a tool (tools offered, the last turn
 * is not a tool result, tool choice not `none`), use a tool result (the last turn is one), answer
 * JSON for a schema (a structured-output format), or plain text.
 */
export type RequestIntent =
  | { readonly kind: 'tool-call'; readonly tool: OfferedTool }
  | { readonly kind: 'tool-result'; readonly result: string }
  | { readonly kind: 'json'; readonly schema: unknown }
  | { readonly kind: 'text' };

/** The tool call an answer makes. */
export interface MockToolCall {
  readonly name: string;
  /** The arguments, a JSON object text valid for the tool's schema. */
  readonly arguments: string;
  /** The arguments in stream pieces (joined, the whole text). */
  readonly argumentPieces: readonly string[];
  /** 24 random letters and digits each format dresses as its own call id (`call_…`, `toolu_01…`). */
  readonly callId: string;
  /** Answered as a legacy Chat Completions `function_call`. */
  readonly legacy?: boolean;
}

/** What one mock answer is made of, whatever the wire format. */
export interface MockAnswer {
  readonly id: string;
  readonly model: string;
  /** The reply text in stream pieces (joined, the whole reply); unused when the answer is a tool call. */
  readonly pieces: readonly string[];
  /** Set when the answer is a tool call instead of text. */
  readonly toolCall?: MockToolCall;
  /** Every prompt token, cached included. */
  readonly inputTokens: number;
  readonly outputTokens: number;
  /** Prompt tokens read from the cache (a part of `inputTokens`). */
  readonly cachedTokens: number;
}

/** One SSE event: an optional `event:` name and its JSON data (or a literal such as `[DONE]`). */
export interface MockEvent {
  readonly event?: string;
  readonly data: unknown;
  /** The usage a correct consumer knows once this event arrived (cumulative), when the event carries usage. */
  readonly usage?: ReportedUsage;
}

export interface AnswerOptions {
  /** False for the `no-usage` behaviour: no usage anywhere in the answer. */
  readonly withUsage: boolean;
  /** Chat Completions `stream_options.include_usage`. */
  readonly includeUsage: boolean;
  readonly profile: Profile;
}

/** One wire format: what a request asks, its JSON answer, its stream, its error body and its request-id header. */
export interface WireFormat {
  readonly requestIdHeader: 'x-request-id' | 'request-id';
  intent(body: Record<string, unknown>): RequestIntent;
  json(answer: MockAnswer, options: AnswerOptions): unknown;
  events(answer: MockAnswer, options: AnswerOptions): MockEvent[];
  error(status: number, message: string, requestId: string): unknown;
}

export const nowSeconds = () => Math.floor(Date.now() / 1000);

export const usageOf = (answer: MockAnswer): ReportedUsage => ({
  inputTokens: answer.inputTokens,
  outputTokens: answer.outputTokens,
  cachedTokens: answer.cachedTokens,
});

type Body = Record<string, unknown>;

/** Every string of a request's prompt (messages or input, system, instructions), keys such as `role` aside. */
export function promptText(body: Body): string {
  const parts: string[] = [];
  const walk = (value: unknown): void => {
    if (typeof value === 'string') parts.push(value);
    else if (Array.isArray(value)) value.forEach(walk);
    else if (value && typeof value === 'object') {
      for (const [key, entry] of Object.entries(value)) if (key !== 'role' && key !== 'type') walk(entry);
    }
  };
  for (const field of ['system', 'instructions', 'messages', 'input']) walk(body[field]);
  return parts.join(' ');
}

/** The text of the last user message (Chat `messages`, Messages `messages`, Responses `input`). */
export function lastUserText(body: Body): string {
  if (typeof body.input === 'string') return body.input;
  const items = (Array.isArray(body.messages) ? body.messages : Array.isArray(body.input) ? body.input : []) as {
    role?: unknown;
    content?: unknown;
  }[];
  const last = items.filter((item) => item && (item.role === 'user' || item.role === undefined)).at(-1);
  const content = last?.content;
  if (typeof content === 'string') return content;
  if (Array.isArray(content)) return content.map((part) => (typeof part?.text === 'string' ? part.text : '')).join(' ');
  return '';
}

/** Deterministic prompt count: about four characters per token, plus a small per-request overhead. */
export const countInputTokens = (body: Body) => Math.ceil(promptText(body).length / 4) + 7;

const SYSTEM_ROLES = new Set(['system', 'developer']);

/**
 * The part of a request a provider's prompt cache would hold for the next turn: the system prompt
 * (`system`, `instructions`) and the first message (Chat Completions `messages` and Responses `input`:
 * the leading system and developer messages and the first other one; Messages: `messages[0]`; or the
 * `input` string). `undefined` when the request has none.
 */
export function promptPrefix(body: Body): Body | undefined {
  const turns = Array.isArray(body.messages) ? body.messages : Array.isArray(body.input) ? body.input : undefined;
  let head: unknown = typeof body.input === 'string' ? body.input : undefined;
  if (turns) {
    let end = 0;
    while (end < turns.length && SYSTEM_ROLES.has((turns[end] as { role?: unknown } | null)?.role as string)) end += 1;
    head = turns.slice(0, end + 1);
  }
  const prefix = { system: body.system, instructions: body.instructions, head };
  return prefix.system === undefined &&
    prefix.instructions === undefined &&
    (head === undefined || (Array.isArray(head) && head.length === 0))
    ? undefined
    : prefix;
}

/** The prompt tokens of a prefix (as {@link countInputTokens} counts them, without the per-request overhead). */
export const countPrefixTokens = (prefix: Body) =>
  Math.ceil(promptText({ system: prefix.system, instructions: prefix.instructions, messages: prefix.head }).length / 4);

const BASE62 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';

/** Random letters and digits, as in the providers' call ids. */
export const randomBase62 = (length: number) =>
  Array.from(randomBytes(length), (byte) => BASE62[byte % BASE62.length]).join('');

/** Two words a piece, so even a short reply streams in several pieces. */
function wordPieces(text: string): string[] {
  const words = text.match(/\S+\s*|\s+/g) ?? [text];
  const pieces: string[] = [];
  for (let index = 0; index < words.length; index += 2) pieces.push(words.slice(index, index + 2).join(''));
  return pieces.length > 0 ? pieces : [''];
}

/** JSON has few spaces: cut it every few characters, as models stream arguments and JSON answers. */
function jsonPieces(text: string): string[] {
  const pieces: string[] = [];
  for (let index = 0; index < text.length; index += 7) pieces.push(text.slice(index, index + 7));
  return pieces.length > 0 ? pieces : [''];
}

/** The text of a tool result (a string, or text parts), as the providers' result fields carry it. */
export function resultText(content: unknown): string {
  if (typeof content === 'string') return content;
  if (Array.isArray(content))
    return content
      .map((part) => (typeof part === 'string' ? part : typeof part?.text === 'string' ? part.text : ''))
      .join('');
  return content === undefined || content === null ? '' : JSON.stringify(content);
}

/**
 * The deterministic answer to a request, following what it asks (`intent`); `reply` (from the mock's
 * headers) replaces a text answer, `cachedTokens` comes from the headers or options.
 */
export function buildAnswer(
  body: Body,
  overrides: { reply?: string; cachedTokens: number },
  intent: RequestIntent = { kind: 'text' },
): MockAnswer {
  const inputTokens = countInputTokens(body);
  const common = {
    id: randomBytes(8).toString('hex'),
    model: typeof body.model === 'string' ? body.model : 'mock-model',
    inputTokens,
    cachedTokens: Math.max(0, Math.min(inputTokens, Math.floor(overrides.cachedTokens) || 0)),
  };
  if (intent.kind === 'tool-call') {
    const args = JSON.stringify(schemaInstance(intent.tool.parameters ?? { type: 'object', properties: {} }));
    const toolCall = {
      name: intent.tool.name,
      arguments: args,
      argumentPieces: jsonPieces(args),
      callId: randomBase62(24),
      ...(intent.tool.legacy ? { legacy: true } : {}),
    };
    return { ...common, pieces: [''], toolCall, outputTokens: Math.ceil((toolCall.name.length + args.length) / 4) + 8 };
  }
  let reply: string;
  let pieces: (text: string) => string[] = wordPieces;
  if (intent.kind === 'json') {
    reply = JSON.stringify(schemaInstance(intent.schema));
    pieces = jsonPieces;
  } else if (intent.kind === 'tool-result') {
    reply = overrides.reply ?? `Mock reply using the tool result: ${intent.result.slice(0, 200)}`;
  } else {
    reply = overrides.reply ?? `Mock reply to: ${lastUserText(body).slice(0, 40)}`;
  }
  return { ...common, pieces: pieces(reply), outputTokens: Math.ceil(reply.length / 4) + 1 };
}

/** A request's tool and output settings, read by its wire format. */
export interface IntentFields {
  /** The function tools the model may call (provider-run tools such as web search left out). */
  readonly tools: readonly OfferedTool[];
  /** `required` (any tool) and a named tool force a call, whatever the last turn. */
  readonly choice: 'auto' | 'none' | 'required' | { readonly name: string };
  /** Set when the last turn is a tool result: its text. */
  readonly toolResult?: string;
  /** Set when a JSON answer is asked for: its schema (`{}` for any JSON object). */
  readonly schema?: unknown;
}

/** What a model does with these fields: see {@link RequestIntent}. */
export function chooseIntent(fields: IntentFields): RequestIntent {
  const { tools, choice } = fields;
  const forced = choice === 'required' || typeof choice === 'object';
  if (tools.length > 0 && choice !== 'none' && (forced || fields.toolResult === undefined)) {
    const tool = typeof choice === 'object' ? tools.find((entry) => entry.name === choice.name) : tools[0];
    if (tool) return { kind: 'tool-call', tool };
  }
  if (fields.schema !== undefined) return { kind: 'json', schema: fields.schema };
  if (fields.toolResult !== undefined) return { kind: 'tool-result', result: fields.toolResult };
  return { kind: 'text' };
}

export const isObject = (value: unknown): value is Record<string, any> =>
  typeof value === 'object' && value !== null && !Array.isArray(value);
