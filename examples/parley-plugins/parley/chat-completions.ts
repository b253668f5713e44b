import { defineAdapter } from 'model-gateway/plugin';
import type { AdapterContext, AdapterRequest, RequestProblem, SseEvent } from 'model-gateway/plugin';
import { dataOf, faultOf, parleyUsage, replyOf, type ParleyRequest, type ParleyTurn } from './parley-wire.ts';

/** Chat Completions messages as clients send them (only what Parley can read is looked at). */
interface ClientMessage {
  readonly role?: unknown;
  readonly content?: unknown;
}

const PARLEY_ROLES: Readonly<Record<string, ParleyTurn['from']>> = {
  system: 'system',
  developer: 'system',
  user: 'human',
  assistant: 'assistant',
};
/** Parley counts words, not tokens: about three words to four tokens. */
const WORDS_PER_TOKEN = 0.75;
const NO_TOOLS = 'Parley has no tool calling';

const isRecord = (value: unknown): value is Record<string, unknown> =>
  typeof value === 'object' && value !== null && !Array.isArray(value);
const present = (value: unknown): boolean =>
  value !== undefined && value !== null && !(Array.isArray(value) && value.length === 0);
const wordsFor = (tokens: number) => Math.max(1, Math.round(tokens * WORDS_PER_TOKEN));

/** A message's text: its string, or its text parts joined; undefined when it has another kind of part. */
function textOf(content: unknown): string | undefined {
  if (typeof content === 'string') return content;
  if (content === null || content === undefined) return '';
  if (!Array.isArray(content)) return undefined;
  let text = '';
  for (const part of content) {
    if (!isRecord(part) || (part.type !== 'text' && part.type !== 'refusal')) return undefined;
    text += typeof part.text === 'string' ? part.text : typeof part.refusal === 'string' ? part.refusal : '';
  }
  return text;
}

/** What Parley cannot do, for the client's 400: tools, several choices, pictures and sound, structured output. */
export function checkRequest({ body }: Pick<AdapterRequest, 'body'>): RequestProblem[] {
  const problems: RequestProblem[] = [];
  const refuse = (field: string, message: string) => problems.push({ field, message });
  for (const field of ['tools', 'functions']) {
    if (present(body[field])) refuse(field, `${NO_TOOLS}: send the request without tools`);
  }
  for (const field of ['tool_choice', 'function_call']) {
    if (present(body[field]) && body[field] !== 'none') refuse(field, `${NO_TOOLS}: leave it out, or none`);
  }
  if (typeof body.n === 'number' && body.n > 1) refuse('n', 'Parley answers with one choice: n must be 1');
  if (body.logprobs === true) refuse('logprobs', 'Parley reports no log probabilities');
  const format = isRecord(body.response_format) ? body.response_format.type : undefined;
  if (format !== undefined && format !== 'text') {
    refuse('response_format', 'Parley answers in text only: no JSON mode or schema');
  }
  const messages = Array.isArray(body.messages) ? (body.messages as ClientMessage[]) : [];
  messages.forEach((message, index) => {
    if (typeof message.role !== 'string' || !(message.role in PARLEY_ROLES)) {
      refuse(`messages[${index}].role`, `Parley's dialog has no '${String(message.role)}' turns (no tool calling)`);
    } else if (textOf(message.content) === undefined) {
      refuse(`messages[${index}].content`, 'Parley reads text only (no images, audio or files)');
    }
  });
  return problems;
}

/** The client's messages as Parley's dialog, its output cap in words, and whether to stream. */
export function buildRequest({ body, upstreamModel, stream }: AdapterRequest) {
  const turn = (message: ClientMessage): ParleyTurn => ({
    from: PARLEY_ROLES[message.role as string]!,
    say: textOf(message.content) ?? '',
  });
  const cap = body.max_completion_tokens ?? body.max_tokens;
  const request: ParleyRequest = {
    engine: upstreamModel,
    dialog: (body.messages as ClientMessage[]).map(turn),
    ...(typeof cap === 'number' ? { limits: { max_words: wordsFor(cap) } } : {}),
    ...(stream ? { stream: true as const } : {}),
  };
  return { body: { ...request } };
}

/** A `chat.completion` of Parley's answer (the gateway writes its `usage` from the tally). */
export function mapAnswer(answer: unknown, context: AdapterContext): Record<string, unknown> {
  const message = { role: 'assistant', content: replyOf(answer) ?? '', refusal: null };
  return {
    id: `chatcmpl-${context.requestId}`,
    object: 'chat.completion',
    created: context.created,
    model: context.upstreamModel,
    choices: [{ index: 0, message, logprobs: null, finish_reason: 'stop' }],
  };
}

/** One `chat.completion.chunk` of the stream. */
function chunk(context: AdapterContext, delta: Record<string, unknown>, finish: string | null): SseEvent {
  return {
    data: JSON.stringify({
      id: `chatcmpl-${context.requestId}`,
      object: 'chat.completion.chunk',
      created: context.created,
      model: context.upstreamModel,
      choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }],
    }),
  };
}

/** Parley's in-stream fault as the route's in-band error (the SDKs raise a chunk with `error`). */
function inBandError(fault: { kind?: string; text?: string } | undefined): SseEvent {
  const message = fault?.text ?? 'Parley failed mid-answer';
  const error = { message, type: 'server_error', param: null, code: fault?.kind ?? null };
  return { data: JSON.stringify({ error }) };
}

/** Whether the role went out yet (the first chunk carries it, as Chat Completions streams do). */
interface StreamState {
  started: boolean;
}

/** Parley's stream as Chat Completions chunks: `chunk` a content delta, `end` the finish, `fault` the in-band error. */
export function mapEvent(event: SseEvent, state: StreamState, context: AdapterContext): SseEvent | null {
  const role = state.started ? {} : { role: 'assistant' };
  if (event.event === 'chunk') {
    const say = dataOf(event.data)?.say;
    state.started = true;
    return chunk(context, { ...role, content: typeof say === 'string' ? say : '' }, null);
  }
  if (event.event === 'end') {
    state.started = true;
    return chunk(context, role, 'stop');
  }
  if (event.event === 'fault') return inBandError(faultOf(dataOf(event.data)));
  return null;
}

/** Parley on `/v1/chat/completions`: everything but tools. */
export const chatCompletionsAdapter = defineAdapter<StreamState>({
  checkRequest,
  buildRequest,
  mapAnswer,
  stream: { terminal: 'end', error: 'fault', createState: () => ({ started: false }), map: mapEvent },
  mapError: ({ status, body }) => {
    const fault = faultOf(body);
    return { message: fault?.text ?? `Parley answered ${status}`, ...(fault?.kind ? { code: fault.kind } : {}) };
  },
  usage: parleyUsage,
});

/** What `/v1/chat` sends: its plain text input as the one human turn. */
interface NativeInput {
  readonly upstreamModel: string;
  readonly input: string;
  readonly maxOutputTokens?: number;
}

/** `/v1/chat` (plain text in and out) on the same Parley route. */
export const parleyNativeChat = {
  route: 'chat-completions',
  buildRequest: ({ upstreamModel, input, maxOutputTokens }: NativeInput) => ({
    engine: upstreamModel,
    dialog: [{ from: 'human', say: input }],
    ...(maxOutputTokens === undefined ? {} : { limits: { max_words: wordsFor(maxOutputTokens) } }),
  }),
  readText: replyOf,
} as const;
