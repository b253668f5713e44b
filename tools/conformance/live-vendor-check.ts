import { request } from 'undici';
import { upstreamCredential, withCredentialQuery } from '../../src/data-plane/upstream/upstream-client.ts';
import { redactCredentialText } from '../../src/data-plane/upstream/redact-credential.ts';
import type {
  AdapterContext,
  ProviderPlugin,
  RouteAdapter,
  TokenUsage,
  UpstreamRoute,
  UpstreamRouteId,
  WireFormat,
} from '../../src/plugins/plugin-contract.ts';
import { SseSplitter } from '../../src/data-plane/sse/sse-relay.ts';
import { clientRequest } from './route-requests.ts';

/** What one declared route's minimal request to the live vendor showed. */
export interface LiveRouteResult {
  readonly plugin: string;
  readonly route: UpstreamRouteId;
  /** On an adapted route, which of its requests: JSON, or a stream (where the adapter maps streams). */
  readonly mode?: 'json' | 'stream';
  readonly path: string;
  /** `ok`, or which part of the declaration the vendor disagrees with. */
  readonly verdict: 'ok' | 'path' | 'auth' | 'format' | 'other';
  readonly detail: string;
}

const PROMPT = 'Reply with one word.';

/** The smallest request of each wire format, for the model's upstream name. */
const MINIMAL_BODY: Readonly<Record<WireFormat, (model: string) => Record<string, unknown>>> = {
  'chat-completions': (model) => ({ model, messages: [{ role: 'user', content: PROMPT }], max_tokens: 16 }),
  messages: (model) => ({ model, max_tokens: 16, messages: [{ role: 'user', content: PROMPT }] }),
  'count-tokens': (model) => ({ model, messages: [{ role: 'user', content: PROMPT }] }),
  responses: (model) => ({ model, input: PROMPT, max_output_tokens: 16 }),
};

/** Whether a 2xx answer has the shape of its wire format's answer. */
export const ANSWER_SHAPE: Readonly<Record<WireFormat, (body: Record<string, unknown>) => boolean>> = {
  'chat-completions': (body) => Array.isArray(body.choices),
  messages: (body) => body.type === 'message' && Array.isArray(body.content),
  'count-tokens': (body) => typeof body.input_tokens === 'number',
  responses: (body) => body.object === 'response' || Array.isArray(body.output),
};

/** The upstream model name a route's minimal request uses: the first model declared on it. */
function modelFor(plugin: ProviderPlugin, route: UpstreamRouteId): string | undefined {
  const model = plugin.models.find((candidate) => candidate.routes.includes(route));
  if (!model) return undefined;
  return model.upstreamModels?.[route] ?? model.upstreamModel ?? model.id;
}

/**
 * Sends one minimal request per declared route of `plugins` to a live vendor at `baseUrl` with `key`
 * in the place the route declares, and says for each whether the vendor agrees with the declaration:
 * a 404 is a path mismatch, a 401 or 403 an auth mismatch, a 2xx answer not shaped as the route's
 * format a format mismatch. An adapted route's request is its adapter's, and its answer must be one
 * the adapter reads (usage, mapped answer) and, where it maps streams, a stream whose terminal event
 * it sees. The key never appears in what it reports.
 */
export async function checkLiveVendor(
  plugins: readonly ProviderPlugin[],
  baseUrl: string,
  key: string,
): Promise<LiveRouteResult[]> {
  const results: LiveRouteResult[] = [];
  const base = new URL(baseUrl.replace(/\/+$/, ''));
  for (const plugin of plugins) {
    for (const [id, route] of Object.entries(plugin.routes) as [UpstreamRouteId, UpstreamRoute][]) {
      const model = modelFor(plugin, id);
      const result = (verdict: LiveRouteResult['verdict'], detail: string): LiveRouteResult => ({
        plugin: plugin.vendor,
        route: id,
        path: route.path,
        verdict,
        detail: redactCredentialText(detail, key),
      });
      if (!model) {
        results.push(result('other', 'no model declares this route'));
        continue;
      }
      if (route.adapter) {
        for (const stream of route.adapter.stream ? [false, true] : [false]) {
          const checked = await checkAdapted(plugin, id, route, route.adapter, model, stream, base, key);
          results.push({ ...checked, detail: redactCredentialText(checked.detail, key) });
        }
        continue;
      }
      const credential = upstreamCredential(route.auth, key);
      const headers: Record<string, string> = {
        'content-type': 'application/json',
        ...route.defaultHeaders,
        ...credential.headers,
      };
      try {
        const response = await request(
          `${base.origin}${withCredentialQuery(base.pathname.replace(/\/$/, '') + route.path, credential)}`,
          {
            method: 'POST',
            headers,
            body: JSON.stringify(MINIMAL_BODY[route.format](model)),
            headersTimeout: 30_000,
            bodyTimeout: 30_000,
          },
        );
        const text = await response.body.text();
        const status = response.statusCode;
        if (status === 404) results.push(result('path', `404 on ${route.path}: the vendor does not serve this path`));
        else if (status === 401 || status === 403)
          results.push(
            result('auth', `${status}: the vendor refused the key sent as declared (${describeAuth(route.auth)})`),
          );
        else if (status >= 200 && status < 300) {
          let body: unknown;
          try {
            body = JSON.parse(text);
          } catch {
            body = undefined;
          }
          const shaped =
            typeof body === 'object' && body !== null && ANSWER_SHAPE[route.format](body as Record<string, unknown>);
          results.push(
            shaped
              ? result('ok', `${status}, a ${route.format} answer`)
              : result('format', `${status}, but the answer is not shaped as ${route.format}: ${text.slice(0, 160)}`),
          );
        } else results.push(result('other', `${status}: ${text.slice(0, 160)}`));
      } catch (error) {
        results.push(result('other', `no answer: ${(error as Error).message}`));
      }
    }
  }
  return results;
}

function describeAuth(auth: UpstreamRoute['auth']): string {
  if (auth === 'bearer') return 'Authorization: Bearer';
  if (auth === 'x-api-key') return 'x-api-key';
  return 'header' in auth ? `${auth.header}${auth.prefix ? `: ${auth.prefix}…` : ''}` : `?${auth.query}=`;
}

/** What an adapter's hooks are told in a live check: the first model declared on the route. */
function liveContext(
  plugin: ProviderPlugin,
  route: UpstreamRouteId,
  upstreamModel: string,
  stream: boolean,
): AdapterContext {
  const declared = plugin.models.find((candidate) => candidate.routes.includes(route))!;
  return {
    route,
    model: `${plugin.vendor}/${declared.id}`,
    upstreamModel,
    stream,
    requestId: 'live-check',
    created: Math.floor(Date.now() / 1000),
  };
}

/** A hook's result, or the reason it failed. */
function attempt<T>(hook: () => T): { value: T } | { failed: string } {
  try {
    return { value: hook() };
  } catch (error) {
    return { failed: error instanceof Error ? error.message : String(error) };
  }
}

/**
 * One adapted route against the live vendor, JSON or stream: the adapter builds the request from the
 * route's minimal client request, and the vendor's answer must be one it reads: usage from its body (or
 * its stream's events), the answer mapped (or its stream's terminal event seen).
 */
async function checkAdapted(
  plugin: ProviderPlugin,
  id: UpstreamRouteId,
  route: UpstreamRoute,
  adapter: RouteAdapter,
  model: string,
  stream: boolean,
  base: URL,
  key: string,
): Promise<LiveRouteResult> {
  const context = liveContext(plugin, id, model, stream);
  const built = attempt(() => adapter.buildRequest({ ...context, body: clientRequest(id, context.model, stream) }));
  const path = 'value' in built ? (built.value.path ?? route.path) : route.path;
  const result = (verdict: LiveRouteResult['verdict'], detail: string): LiveRouteResult => ({
    plugin: plugin.vendor,
    route: id,
    mode: stream ? 'stream' : 'json',
    path,
    verdict,
    detail,
  });
  if ('failed' in built) return result('other', `routes.${id}.adapter.buildRequest failed: ${built.failed}`);
  const credential = upstreamCredential(route.auth, key);
  const headers: Record<string, string> = {
    'content-type': 'application/json',
    accept: 'application/json, text/event-stream',
    ...route.defaultHeaders,
    ...built.value.headers,
    ...credential.headers,
  };
  let status: number;
  let text: string;
  let contentType: string;
  try {
    const response = await request(
      `${base.origin}${withCredentialQuery(base.pathname.replace(/\/$/, '') + path, credential)}`,
      {
        method: built.value.method ?? 'POST',
        headers,
        body: JSON.stringify(built.value.body),
        headersTimeout: 30_000,
        bodyTimeout: 30_000,
      },
    );
    status = response.statusCode;
    contentType = String(response.headers['content-type'] ?? '');
    text = await response.body.text();
  } catch (error) {
    return result('other', `no answer: ${(error as Error).message}`);
  }
  if (status === 404) return result('path', `404 on ${path}: the vendor does not serve this path`);
  if (status === 401 || status === 403)
    return result('auth', `${status}: the vendor refused the key sent as declared (${describeAuth(route.auth)})`);
  if (status < 200 || status >= 300) return result('other', `${status}: ${text.slice(0, 160)}`);
  if (!stream) {
    let body: unknown;
    try {
      body = JSON.parse(text);
    } catch {
      return result('format', `${status}, but the answer is not JSON: ${text.slice(0, 160)}`);
    }
    const usage = attempt(() => adapter.usage.fromBody(body));
    if ('failed' in usage || usage.value === undefined) {
      return result(
        'format',
        `${status}, but routes.${id}.adapter.usage.fromBody read no usage from it${'failed' in usage ? ` (${usage.failed})` : ''}: ${text.slice(0, 160)}`,
      );
    }
    const mapped = attempt(() => adapter.mapAnswer(body, context));
    if ('failed' in mapped)
      return result(
        'format',
        `${status}, but routes.${id}.adapter.mapAnswer failed on it (${mapped.failed}): ${text.slice(0, 160)}`,
      );
    if (!ANSWER_SHAPE[route.format](mapped.value))
      return result(
        'format',
        `${status}, but what routes.${id}.adapter.mapAnswer makes of it is not shaped as ${route.format}`,
      );
    return result('ok', `${status}, mapped to a ${route.format} answer, usage ${JSON.stringify(usage.value)}`);
  }
  if (!contentType.startsWith('text/event-stream'))
    return result(
      'format',
      `${status}, but the answer is ${contentType || 'untyped'}, not an event stream: ${text.slice(0, 160)}`,
    );
  const mapping = adapter.stream!;
  const events = new SseSplitter()
    .push(Buffer.from(text, 'utf8'))
    .flatMap((block) => (block.event ? [block.event] : []));
  const state = attempt(() => mapping.createState?.(context));
  if ('failed' in state) return result('other', `routes.${id}.adapter.stream.createState failed: ${state.failed}`);
  let usage: TokenUsage | undefined;
  let terminal = false;
  for (const event of events) {
    const read = attempt(() => adapter.usage.fromStreamEvent(usage, event));
    if ('failed' in read)
      return result(
        'format',
        `routes.${id}.adapter.usage.fromStreamEvent failed on an event (${read.failed}): ${event.data.slice(0, 160)}`,
      );
    usage = read.value;
    const mapped = attempt(() => mapping.map(event, state.value, context));
    if ('failed' in mapped)
      return result(
        'format',
        `routes.${id}.adapter.stream.map failed on an event (${mapped.failed}): ${event.data.slice(0, 160)}`,
      );
    const isTerminal = attempt(() =>
      typeof mapping.terminal === 'string' ? event.event === mapping.terminal : mapping.terminal(event),
    );
    if ('value' in isTerminal && isTerminal.value) terminal = true;
  }
  const names = [...new Set(events.flatMap((event) => (event.event === undefined ? [] : [event.event])))];
  if (!terminal) {
    return result(
      'format',
      `${status}, ${events.length} event(s) (${names.length ? `named ${names.join(', ')}` : 'without names'}), but routes.${id}.adapter.stream.terminal matched none of them`,
    );
  }
  if (usage === undefined)
    return result(
      'format',
      `${status}, a stream to its terminal event, but routes.${id}.adapter.usage.fromStreamEvent read no usage from it`,
    );
  return result(
    'ok',
    `${status}, a stream of ${events.length} event(s) to its terminal event, usage ${JSON.stringify(usage)}`,
  );
}
