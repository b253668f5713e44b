import { randomBytes } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import {
  chatCompletionEvents,
  chatCompletionJson,
  messageEvents,
  messageJson,
  responseEvents,
  responseJson,
  type MockAnswer,
  type MockEvent,
  type Profile,
} from './mock-formats.ts';

export interface MockUpstreamOptions {
  readonly port?: number;
  readonly host?: string;
  /** When set, requests must carry it (`Authorization: Bearer`, or `x-api-key` on the Messages routes). */
  readonly apiKey?: string;
  /** Stream shape; per request also the body field `mock_profile` or the header `x-mock-profile`. */
  readonly profile?: Profile;
  /** Pause between two stream events. */
  readonly chunkDelayMs?: number;
  /** Prompt tokens reported as read from the cache (override per request: `x-mock-cached-tokens`). */
  readonly cachedTokens?: number;
  readonly lineEnding?: '\n' | '\r\n';
}

/** The usage an answer carried, normalised: `inputTokens` counts every prompt token, cached included. */
export interface ReportedUsage {
  readonly inputTokens: number;
  readonly outputTokens: number;
  readonly cachedTokens: number;
}

export interface RecordedRequest {
  readonly method: string;
  readonly path: string;
  readonly headers: IncomingMessage['headers'];
  readonly rawBody: string;
  readonly body: any;
  readonly stream: boolean;
  status: number;
  /** What the answer reported; undefined when it carried no usage (errors, count_tokens, no-usage). */
  reportedUsage?: ReportedUsage;
  /** The whole answer was written. */
  completed: boolean;
}

export type MockBehaviour =
  | { kind: 'status'; status: number; body?: unknown; headers?: Record<string, string> }
  | { kind: 'hang' }
  | { kind: 'reset' }
  | { kind: 'delay'; ms: number }
  | { kind: 'no-usage' }
  | { kind: 'drop-mid-stream'; afterEvents: number };

export interface MockUpstream {
  /** Base URL with the version prefix, e.g. `http://127.0.0.1:9000/v1`. */
  readonly url: string;
  readonly port: number;
  readonly requests: RecordedRequest[];
  /** Behaviours for the next requests, one each, in order; then requests are answered normally. */
  enqueue(...behaviours: MockBehaviour[]): void;
  reset(): void;
  close(): Promise<void>;
}

type Format = 'chat-completions' | 'responses' | 'messages' | 'count-tokens';
const ROUTES: Record<string, Format> = {
  '/v1/chat/completions': 'chat-completions',
  '/v1/responses': 'responses',
  '/v1/messages': 'messages',
  '/v1/messages/count_tokens': 'count-tokens',
};

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Every string of a request's prompt, for a token count that grows with the input. */
function promptText(body: Record<string, unknown>): string {
  const parts: string[] = [];
  const walk = (value: unknown): void => {
    if (typeof value === 'string') parts.push(value);
    else if (Array.isArray(value)) value.forEach(walk);
    else if (value && typeof value === 'object') Object.entries(value).forEach(([key, entry]) => key !== 'role' && key !== 'type' && walk(entry));
  };
  for (const field of ['messages', 'input', 'system', 'instructions']) walk(body[field]);
  return parts.join(' ');
}

function lastUserText(body: Record<string, unknown>): string {
  if (typeof body.input === 'string') return body.input;
  const messages = Array.isArray(body.messages) ? (body.messages as { content?: unknown }[]) : [];
  const content = messages.at(-1)?.content;
  if (typeof content === 'string') return content;
  if (Array.isArray(content)) return content.map((part) => (part as { text?: string }).text ?? '').join(' ');
  return promptText(body);
}

/** Deterministic counts: about four characters per token, plus a small per-request overhead. */
function answerFor(body: Record<string, unknown>, req: IncomingMessage, cachedDefault: number): MockAnswer {
  const reply = String(req.headers['x-mock-reply'] ?? `Mock reply to: ${lastUserText(body).slice(0, 40)}`);
  const words = reply.match(/\S+\s*/g) ?? [reply];
  const pieces: string[] = [];
  for (let index = 0; index < words.length; index += 2) pieces.push(words.slice(index, index + 2).join(''));
  const inputTokens = Math.ceil(promptText(body).length / 4) + 7;
  const cached = Math.min(inputTokens, Number(req.headers['x-mock-cached-tokens'] ?? cachedDefault) || 0);
  return {
    id: `mock-${randomBytes(6).toString('hex')}`,
    model: typeof body.model === 'string' ? body.model : 'mock-model',
    pieces,
    inputTokens,
    outputTokens: Math.ceil(reply.length / 4) + 1,
    cachedTokens: cached,
  };
}

function errorBody(format: Format, status: number, message: string): unknown {
  const type = status === 401 ? 'authentication_error' : status === 429 ? 'rate_limit_error' : status >= 500 ? 'api_error' : 'invalid_request_error';
  if (format === 'messages' || format === 'count-tokens') return { type: 'error', error: { type, message } };
  return { error: { message, type, param: null, code: null } };
}

/**
 * A mock upstream provider on a real socket, speaking Chat Completions, Responses and Messages (JSON
 * and SSE, with realistic usage), for local trials, the tests and the benchmark.
 */
export async function startMockUpstream(options: MockUpstreamOptions = {}): Promise<MockUpstream> {
  const requests: RecordedRequest[] = [];
  let queue: MockBehaviour[] = [];
  const sockets = new Set<Socket>();
  const newline = options.lineEnding ?? '\n';

  const send = (res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}) => {
    const payload = JSON.stringify(body);
    res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(payload), ...headers });
    res.end(payload);
  };

  const handle = async (req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const rawBody = Buffer.concat(chunks).toString('utf8');
    const path = (req.url ?? '/').split('?')[0]!;
    const format = ROUTES[path];
    let body: Record<string, any> = {};
    try {
      body = rawBody ? JSON.parse(rawBody) : {};
    } catch {
      body = {};
    }
    const record: RecordedRequest = { method: req.method ?? 'GET', path, headers: req.headers, rawBody, body, stream: body.stream === true, status: 0, completed: false };
    requests.push(record);
    const reply = (status: number, payload: unknown, headers?: Record<string, string>) => {
      record.status = status;
      send(res, status, payload, headers);
      record.completed = true;
    };
    if (!format || req.method !== 'POST') return reply(404, { error: { message: `no route ${req.method} ${path}`, type: 'not_found_error' } });

    const messagesFamily = format === 'messages' || format === 'count-tokens';
    if (options.apiKey) {
      const bearer = req.headers.authorization === `Bearer ${options.apiKey}`;
      const headerKey = messagesFamily && req.headers['x-api-key'] === options.apiKey;
      if (!bearer && !headerKey) return reply(401, errorBody(format, 401, 'invalid api key'));
    }
    const behaviour = queue.shift();
    if (behaviour?.kind === 'reset') return req.socket.destroy();
    if (behaviour?.kind === 'hang') return;
    if (behaviour?.kind === 'status') return reply(behaviour.status, behaviour.body ?? errorBody(format, behaviour.status, `mock status ${behaviour.status}`), behaviour.headers);
    if (behaviour?.kind === 'delay') await sleep(behaviour.ms);
    if (messagesFamily && format === 'messages' && typeof body.max_tokens !== 'number') {
      return reply(400, errorBody(format, 400, 'max_tokens: Field required'));
    }
    if (format === 'count-tokens') return reply(200, { input_tokens: Math.ceil(promptText(body).length / 4) + 7 });

    const answer = answerFor(body, req, options.cachedTokens ?? 0);
    const withUsage = behaviour?.kind !== 'no-usage';
    // A body field reaches the mock through the gateway (extra fields are forwarded), a header does not.
    const profile = (body.mock_profile as Profile | undefined) ?? (req.headers['x-mock-profile'] as Profile | undefined) ?? options.profile ?? 'standard';
    const requestId: Record<string, string> = { [messagesFamily ? 'request-id' : 'x-request-id']: `req_${answer.id}` };
    const reported: ReportedUsage = { inputTokens: answer.inputTokens, outputTokens: answer.outputTokens, cachedTokens: answer.cachedTokens };

    if (!record.stream) {
      const json = format === 'chat-completions' ? chatCompletionJson(answer, withUsage) : format === 'responses' ? responseJson(answer, withUsage) : messageJson(answer, withUsage);
      if (withUsage) record.reportedUsage = reported;
      return reply(200, json, requestId);
    }

    const includeUsage = body.stream_options?.include_usage === true;
    const events: MockEvent[] =
      format === 'chat-completions'
        ? chatCompletionEvents(answer, { includeUsage, withUsage, profile })
        : format === 'responses'
          ? responseEvents(answer, withUsage)
          : messageEvents(answer, withUsage);
    const lineEnding = profile === 'empty-function-call' ? '\r\n' : newline;
    const split = req.headers['x-mock-split'] === '1';
    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', ...requestId });
    record.status = 200;
    if (withUsage && (format !== 'chat-completions' || includeUsage || profile === 'running-usage')) {
      record.reportedUsage = profile === 'running-usage' ? { ...reported, outputTokens: answer.outputTokens + 40 } : reported;
    }
    for (const [index, event] of events.entries()) {
      if (behaviour?.kind === 'drop-mid-stream' && index === behaviour.afterEvents) {
        record.reportedUsage = undefined;
        // Let what was written reach the wire first, as a connection that breaks later would.
        await sleep(20);
        return res.socket?.destroy();
      }
      const data = typeof event.data === 'string' ? event.data : JSON.stringify(event.data);
      const text = `${event.event ? `event: ${event.event}${lineEnding}` : ''}data: ${data}${lineEnding}${lineEnding}`;
      if (split) {
        const middle = Math.floor(text.length / 2);
        res.write(text.slice(0, middle));
        await sleep(1);
        res.write(text.slice(middle));
      } else {
        res.write(text);
      }
      if (options.chunkDelayMs) await sleep(options.chunkDelayMs);
      if (res.destroyed) return;
    }
    res.end();
    record.completed = true;
  };

  const server: Server = createServer((req, res) => {
    handle(req, res).catch((error: unknown) => {
      if (!res.headersSent) send(res, 500, { error: { message: String(error), type: 'api_error' } });
      else res.destroy();
    });
  });
  server.keepAliveTimeout = 60_000;
  server.on('connection', (socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port ?? 0, options.host ?? '127.0.0.1', resolve);
  });
  const port = (server.address() as AddressInfo).port;
  return {
    url: `http://${options.host ?? '127.0.0.1'}:${port}/v1`,
    port,
    requests,
    enqueue: (...behaviours) => void queue.push(...behaviours),
    reset: () => {
      requests.length = 0;
      queue = [];
    },
    close: async () => {
      for (const socket of sockets) socket.destroy();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}
