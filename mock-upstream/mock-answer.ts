import { randomBytes } from 'node:crypto';

export type Profile = 'standard' | 'running-usage' | 'empty-function-call';
export const PROFILES: readonly Profile[] = ['standard', 'running-usage', 'empty-function-call'];

/** The usage an answer carried, normalised: `inputTokens` counts every prompt token, cached included. */
export interface ReportedUsage {
  readonly inputTokens: number;
  readonly outputTokens: number;
  readonly cachedTokens: number;
}

/** What one mock answer is made of, whatever the wire format. */
export interface MockAnswer {
  readonly id: string;
  readonly model: string;
  /** The reply text in stream pieces (joined, the whole reply). */
  readonly pieces: readonly string[];
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

/** One wire format: its JSON answer, its stream, its error body and its request-id header. */
export interface WireFormat {
  readonly requestIdHeader: 'x-request-id' | 'request-id';
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
  const items = (Array.isArray(body.messages) ? body.messages : Array.isArray(body.input) ? body.input : []) as { role?: unknown; content?: unknown }[];
  const last = items.filter((item) => item && (item.role === 'user' || item.role === undefined)).at(-1);
  const content = last?.content;
  if (typeof content === 'string') return content;
  if (Array.isArray(content)) return content.map((part) => (typeof part?.text === 'string' ? part.text : '')).join(' ');
  return '';
}

/** Deterministic prompt count: about four characters per token, plus a small per-request overhead. */
export const countInputTokens = (body: Body) => Math.ceil(promptText(body).length / 4) + 7;

/** The deterministic answer to a request; `reply` and `cachedTokens` come from the mock's headers or options. */
export function buildAnswer(body: Body, overrides: { reply?: string; cachedTokens: number }): MockAnswer {
  const reply = overrides.reply ?? `Mock reply to: ${lastUserText(body).slice(0, 40)}`;
  // Two words a piece, so even a short reply streams in several pieces.
  const words = reply.match(/\S+\s*|\s+/g) ?? [reply];
  const pieces: string[] = [];
  for (let index = 0; index < words.length; index += 2) pieces.push(words.slice(index, index + 2).join(''));
  const inputTokens = countInputTokens(body);
  return {
    id: randomBytes(8).toString('hex'),
    model: typeof body.model === 'string' ? body.model : 'mock-model',
    pieces: pieces.length > 0 ? pieces : [''],
    inputTokens,
    outputTokens: Math.ceil(reply.length / 4) + 1,
    cachedTokens: Math.max(0, Math.min(inputTokens, Math.floor(overrides.cachedTokens) || 0)),
  };
}
