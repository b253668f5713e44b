import { request } from 'undici';
import { upstreamCredential, withCredentialQuery } from '../../src/data-plane/upstream/upstream-credential.ts';
import { redactCredentialText } from '../../src/data-plane/upstream/redact-credential.ts';
import type { ProviderPlugin, UpstreamRoute, UpstreamRouteId, WireFormat } from '../../src/plugins/plugin-contract.ts';

/** What one declared route's minimal request to the live vendor showed. */
export interface LiveRouteResult {
  readonly plugin: string;
  readonly route: UpstreamRouteId;
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
const ANSWER_SHAPE: Readonly<Record<WireFormat, (body: Record<string, unknown>) => boolean>> = {
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
 * format a format mismatch. The key never appears in what it reports.
 */
export async function checkLiveVendor(plugins: readonly ProviderPlugin[], baseUrl: string, key: string): Promise<LiveRouteResult[]> {
  const results: LiveRouteResult[] = [];
  const base = new URL(baseUrl.replace(/\/+$/, ''));
  for (const plugin of plugins) {
    for (const [id, route] of Object.entries(plugin.routes) as [UpstreamRouteId, UpstreamRoute][]) {
      const model = modelFor(plugin, id);
      const result = (verdict: LiveRouteResult['verdict'], detail: string): LiveRouteResult => ({ plugin: plugin.vendor, route: id, path: route.path, verdict, detail: redactCredentialText(detail, key) });
      if (!model) {
        results.push(result('other', 'no model declares this route'));
        continue;
      }
      const credential = upstreamCredential(route.auth, key);
      const headers: Record<string, string> = { 'content-type': 'application/json', ...route.defaultHeaders, ...credential.headers };
      try {
        const response = await request(`${base.origin}${withCredentialQuery(base.pathname.replace(/\/$/, '') + route.path, credential)}`, {
          method: 'POST',
          headers,
          body: JSON.stringify(MINIMAL_BODY[route.format](model)),
          headersTimeout: 30_000,
          bodyTimeout: 30_000,
        });
        const text = await response.body.text();
        const status = response.statusCode;
        if (status === 404) results.push(result('path', `404 on ${route.path}: the vendor does not serve this path`));
        else if (status === 401 || status === 403) results.push(result('auth', `${status}: the vendor refused the key sent as declared (${describeAuth(route.auth)})`));
        else if (status >= 200 && status < 300) {
          let body: unknown;
          try {
            body = JSON.parse(text);
          } catch {
            body = undefined;
          }
          const shaped = typeof body === 'object' && body !== null && ANSWER_SHAPE[route.format](body as Record<string, unknown>);
          results.push(shaped ? result('ok', `${status}, a ${route.format} answer`) : result('format', `${status}, but the answer is not shaped as ${route.format}: ${text.slice(0, 160)}`));
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
