import { createHash, randomBytes } from 'node:crypto';
import { setMaxListeners } from 'node:events';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { chatCompletionsFormat } from './chat-completions-format.ts';
import { messagesFormat } from './messages-format.ts';
import {
  buildAnswer,
  countInputTokens,
  countPrefixTokens,
  promptPrefix,
  PROFILES,
  usageOf,
  type MockEvent,
  type Profile,
  type ReportedUsage,
  type WireFormat,
} from './mock-answer.ts';
import { responsesFormat } from './responses-format.ts';

export type { Profile, ReportedUsage } from './mock-answer.ts';

export interface MockUpstreamOptions {
  readonly port?: number;
  readonly host?: string;
  /** When set, requests must carry it: `Authorization: Bearer`, or also `x-api-key` on the Messages routes. */
  readonly apiKey?: string;
  /**
   * Further places `apiKey` is accepted in on every route, besides `Authorization: Bearer` (and
   * `x-api-key` on Messages): a header (after a prefix) or a query parameter.
   */
  readonly keyPlaces?: readonly ({ readonly header: string; readonly prefix?: string } | { readonly query: string })[];
  /**
   * Stream shape; per request also the header `x-mock-profile` or the body field `mock_profile` (which a gateway
   * forwards).
   */
  readonly profile?: Profile;
  /** Pause between two stream events. */
  readonly chunkDelayMs?: number;
  /** Prompt tokens reported as read from the cache (per request: header `x-mock-cached-tokens`). */
  readonly cachedTokens?: number;
  /**
   * Prompt caching as a provider deployment does it: this instance remembers the prompt prefixes
   * (system prompt and first message) it answered, and reports a repeat's prefix tokens as read from
   * its cache (per request also the header `x-mock-prompt-cache: 1`). `x-mock-cached-tokens` wins.
   */
  readonly promptCache?: boolean;
  /** Line ending of every stream (the `empty-function-call` profile always uses `\r\n`). */
  readonly lineEnding?: '\n' | '\r\n';
  /** Keep every request in `requests` (default true); the CLI turns it off so a long benchmark does not grow memory. */
  readonly recordRequests?: boolean;
}

export interface RecordedRequest {
  readonly method: string;
  readonly path: string;
  /** The query string, without `?` (empty when none). */
  readonly query: string;
  readonly headers: Record<string, string | string[] | undefined>;
  /** The parsed JSON body (undefined when it was not JSON). */
  readonly body: any;
  readonly rawBody: string;
  /** The body exactly as received, for byte comparisons. */
  readonly rawBytes: Buffer;
  readonly stream: boolean;
  /** The status sent; 0 while none was (hang, reset). */
  status: number;
  /**
   * The usage the answer carried, normalised (cumulative, as a correct consumer reads it from the bytes
   * actually written); undefined when none was sent (errors, count_tokens, no-usage, a drop before it).
   */
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
  /** Prompt prefixes this instance holds in its prompt cache (see `promptCache`). */
  readonly cachedPrefixes: number;
  /** Behaviours for the next requests, one per incoming request, in order; then requests are answered normally. */
  enqueue(...behaviours: MockBehaviour[]): void;
  /** Clears the recorded requests, the behaviour queue and the prompt cache. */
  reset(): void;
  /** Stops listening and destroys every open socket (hanging requests included). */
  close(): Promise<void>;
}

interface Route {
  readonly format: WireFormat;
  readonly countTokens?: boolean;
  /** Messages routes also accept `x-api-key`. */
  readonly apiKeyHeader?: boolean;
}

const ROUTES: Record<string, Route> = {
  '/v1/chat/completions': { format: chatCompletionsFormat },
  '/v1/responses': { format: responsesFormat },
  '/v1/messages': { format: messagesFormat, apiKeyHeader: true },
  '/v1/messages/count_tokens': { format: messagesFormat, apiKeyHeader: true, countTokens: true },
};

const header = (req: IncomingMessage, name: string): string | undefined => {
  const value = req.headers[name];
  return Array.isArray(value) ? value[0] : value;
};

/** `x-mock-reply` may be percent-encoded, to carry non-ASCII text in a header. */
function replyHeader(req: IncomingMessage): string | undefined {
  const value = header(req, 'x-mock-reply');
  if (value === undefined) return undefined;
  try {
    return decodeURIComponent(value);
  } catch {
    return value;
  }
}

// Prompt prefixes an instance remembers at most; then it forgets them all, as a cache that was evicted.
const MAX_CACHED_PREFIXES = 100_000;

function frame(event: MockEvent, eol: string): Buffer {
  const data = typeof event.data === 'string' ? event.data : JSON.stringify(event.data);
  return Buffer.from(`${event.event === undefined ? '' : `event: ${event.event}${eol}`}data: ${data}${eol}${eol}`);
}

/**
 * A mock upstream provider on a real socket, speaking Chat Completions, Responses and Messages (JSON
 * and SSE, with deterministic usage), for local trials, the tests and the benchmark.
 */
export async function startMockUpstream(options: MockUpstreamOptions = {}): Promise<MockUpstream> {
  const requests: RecordedRequest[] = [];
  let queue: MockBehaviour[] = [];
  const prefixes = new Set<string>();
  /** With prompt caching: the prefix tokens when this instance saw the prefix before (and from now on, it has). */
  const cachedPrefixTokens = (body: Record<string, unknown>): number => {
    const prefix = promptPrefix(body);
    if (prefix === undefined) return 0;
    const key = createHash('sha256').update(JSON.stringify(prefix)).digest('base64');
    if (prefixes.has(key)) return countPrefixTokens(prefix);
    if (prefixes.size >= MAX_CACHED_PREFIXES) prefixes.clear();
    prefixes.add(key);
    return 0;
  };
  const sockets = new Set<Socket>();
  const closing = new AbortController();
  // Every delayed answer listens for the close: many at once are expected, not a leak.
  setMaxListeners(0, closing.signal);
  const pause = (ms: number) => sleep(ms, undefined, { signal: closing.signal });

  const handle = async (req: IncomingMessage, res: ServerResponse) => {
    const behaviour = queue.shift();
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const rawBytes = Buffer.concat(chunks);
    const rawBody = rawBytes.toString('utf8');
    const [path = '/', query = ''] = (req.url ?? '/').split(/\?(.*)/s);
    let body: any;
    try {
      body = rawBody === '' ? {} : JSON.parse(rawBody);
    } catch {
      body = undefined;
    }
    const record: RecordedRequest = {
      method: req.method ?? '',
      path,
      query,
      headers: req.headers,
      body,
      rawBody,
      rawBytes,
      stream: body?.stream === true,
      status: 0,
      completed: false,
    };
    if (options.recordRequests !== false) requests.push(record);

    const route = req.method === 'POST' ? ROUTES[path] : undefined;
    const format = route?.format ?? chatCompletionsFormat;
    const requestId = `req_${randomBytes(8).toString('hex')}`;
    const idHeader = { [format.requestIdHeader]: requestId };
    const sendJson = (status: number, payload: unknown, headers: Record<string, string> = {}, dropHalfway = false) => {
      const bytes = Buffer.from(typeof payload === 'string' ? payload : JSON.stringify(payload));
      record.status = status;
      res.writeHead(status, {
        'content-type': 'application/json',
        'content-length': bytes.length,
        ...idHeader,
        ...headers,
      });
      if (dropHalfway) {
        res.write(bytes.subarray(0, bytes.length >> 1));
        setTimeout(() => req.socket.destroy(), 20);
        return;
      }
      res.end(bytes);
      record.completed = true;
    };
    const fail = (status: number, message: string) => sendJson(status, format.error(status, message, requestId));

    if (behaviour?.kind === 'reset') return void req.socket.destroy();
    if (behaviour?.kind === 'hang') return;
    if (behaviour?.kind === 'delay') await pause(behaviour.ms);
    if (behaviour?.kind === 'status') {
      return behaviour.body === undefined
        ? sendJson(
            behaviour.status,
            format.error(behaviour.status, `mock status ${behaviour.status}`, requestId),
            behaviour.headers,
          )
        : sendJson(behaviour.status, behaviour.body, behaviour.headers);
    }

    if (!route) return fail(404, `Unknown route: ${req.method} ${path}`);
    if (options.apiKey !== undefined) {
      const bearer = header(req, 'authorization') === `Bearer ${options.apiKey}`;
      const params = new URLSearchParams(query);
      const elsewhere = (options.keyPlaces ?? []).some((place) =>
        'query' in place
          ? params.get(place.query) === options.apiKey
          : header(req, place.header) === `${place.prefix ?? ''}${options.apiKey}`,
      );
      if (!bearer && !elsewhere && !(route.apiKeyHeader && header(req, 'x-api-key') === options.apiKey))
        return fail(401, 'Incorrect API key provided.');
    }
    if (body === null || typeof body !== 'object' || Array.isArray(body))
      return fail(400, 'The request body is not a JSON object.');
    if (route.countTokens) return sendJson(200, { input_tokens: countInputTokens(body) });
    if (route.format === messagesFormat && typeof body.max_tokens !== 'number')
      return fail(400, 'max_tokens: Field required');
    const profile = body.mock_profile ?? header(req, 'x-mock-profile') ?? options.profile ?? 'standard';
    if (!PROFILES.includes(profile)) return fail(400, `Unknown mock profile: ${String(profile)}`);

    const cachedHeader = header(req, 'x-mock-cached-tokens');
    const promptCache = options.promptCache === true || header(req, 'x-mock-prompt-cache') === '1';
    const cachedTokens =
      cachedHeader !== undefined
        ? Number(cachedHeader)
        : promptCache
          ? cachedPrefixTokens(body)
          : (options.cachedTokens ?? 0);
    const answer = buildAnswer(body, { reply: replyHeader(req), cachedTokens }, route.format.intent(body));
    const answerOptions = {
      withUsage: behaviour?.kind !== 'no-usage',
      includeUsage: body.stream_options?.include_usage === true,
      profile: profile as Profile,
    };
    const drop = behaviour?.kind === 'drop-mid-stream' ? behaviour.afterEvents : undefined;

    if (!record.stream) {
      if (answerOptions.withUsage && drop === undefined) record.reportedUsage = usageOf(answer);
      return sendJson(200, format.json(answer, answerOptions), {}, drop !== undefined);
    }

    const events = format.events(answer, answerOptions);
    const eol = profile === 'empty-function-call' ? '\r\n' : (options.lineEnding ?? '\n');
    const split = header(req, 'x-mock-split') === '1';
    record.status = 200;
    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', ...idHeader });
    res.flushHeaders();
    for (const event of events.slice(0, drop ?? events.length)) {
      const bytes = frame(event, eol);
      if (split) {
        res.write(bytes.subarray(0, bytes.length >> 1));
        await pause(1);
        res.write(bytes.subarray(bytes.length >> 1));
      } else {
        res.write(bytes);
      }
      if (event.usage) record.reportedUsage = event.usage;
      if (options.chunkDelayMs) await pause(options.chunkDelayMs);
      if (res.destroyed) return;
    }
    if (drop !== undefined) {
      // Let what was written reach the client first, as a connection that breaks later would.
      await pause(20);
      return void req.socket.destroy();
    }
    res.end();
    record.completed = true;
  };

  const server = createServer((req, res) => {
    handle(req, res).catch(() => {
      if (closing.signal.aborted || res.headersSent) return void res.destroy();
      res
        .writeHead(500, { 'content-type': 'application/json' })
        .end(JSON.stringify({ error: { message: 'mock upstream failure', type: 'server_error' } }));
    });
  });
  server.keepAliveTimeout = 60_000;
  server.on('connection', (socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });
  const host = options.host ?? '127.0.0.1';
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port ?? 0, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const port = (server.address() as AddressInfo).port;
  return {
    url: `http://${host.includes(':') ? `[${host}]` : host}:${port}/v1`,
    port,
    requests,
    get cachedPrefixes() {
      return prefixes.size;
    },
    enqueue: (...behaviours) => void queue.push(...behaviours),
    reset: () => {
      requests.length = 0;
      queue = [];
      prefixes.clear();
    },
    close: async () => {
      closing.abort();
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      for (const socket of sockets) socket.destroy();
      await closed;
    },
  };
}
