import { isRecord } from './known-fields.ts';
import type {
  AdaptedError,
  AdaptedRequest,
  AdapterContext,
  AdapterRequest,
  EventMatch,
  ProviderPlugin,
  RequestProblem,
  RouteAdapter,
  SseEvent,
  StreamMapping,
  TokenUsage,
  UpstreamRoute,
  UpstreamRouteId,
  UsageExtractor,
} from './plugin-contract.ts';
import { allEvents, isEvent, isUsage, shapeFault, thrown } from './plugin-fault.ts';
import { credentialHeaderNames } from './validate-auth.ts';

/** What each adapter hook may return, for the fault's message. */
export const ADAPTER_SHAPES = {
  checkRequest: 'checkRequest returns undefined or a list of { field: string, message: string }',
  buildRequest:
    'buildRequest returns { body, path?, method?, headers? }: body an object JSON.stringify can write, path starting ' +
    "with '/', method 'POST' or 'PUT', headers lower case names to strings (no credential, host, content-length, " +
    'transfer-encoding or connection)',
  mapAnswer: "mapAnswer returns the route's answer, an object (not a list) that JSON.stringify can write",
  map: 'stream.map returns undefined, null, an event ({ data: string, event?: string, id?: string }) or a list of them',
  match: 'returns true or false',
  mapError:
    'mapError returns undefined or { message: string, type?: string, code?: string, param?: string, ' +
    'status?: an integer from 400 to 599 }',
  usage: 'a usage reader returns undefined or { inputTokens, outputTokens, cachedTokens }, each a finite count',
} as const;

/** Headers the gateway sets itself on an adapted request, beside the credential's. */
const GATEWAY_SET = ['host', 'content-length', 'transfer-encoding', 'connection'];
const HEADER_NAME = /^[a-z0-9!#$%&'*+.^_`|~-]+$/;
const optionalString = (value: unknown): boolean => value === undefined || typeof value === 'string';

function isProblems(value: unknown): value is readonly RequestProblem[] {
  if (!Array.isArray(value)) return false;
  return value.every((item) => isRecord(item) && typeof item.field === 'string' && typeof item.message === 'string');
}

function isAdaptedRequest(value: unknown, credentials: readonly string[]): value is AdaptedRequest {
  if (!isRecord(value) || !isRecord(value.body)) return false;
  const { path, method, headers } = value;
  if (path !== undefined && !(typeof path === 'string' && path.startsWith('/') && !/[\s#]/.test(path))) return false;
  if (method !== undefined && method !== 'POST' && method !== 'PUT') return false;
  if (headers === undefined) return true;
  if (!isRecord(headers)) return false;
  for (const [name, text] of Object.entries(headers)) {
    if (!HEADER_NAME.test(name) || typeof text !== 'string' || /[\r\n\0]/.test(text)) return false;
    if (credentials.includes(name) || GATEWAY_SET.includes(name)) return false;
  }
  return true;
}

function isAdaptedError(value: unknown): value is AdaptedError {
  if (!isRecord(value) || typeof value.message !== 'string') return false;
  const { type, code, param, status } = value;
  if (!optionalString(type) || !optionalString(code) || !optionalString(param)) return false;
  return status === undefined || (Number.isInteger(status) && (status as number) >= 400 && (status as number) <= 599);
}

/** A guarded `terminal` or `error`: a name stays a name; a predicate's throw or non-boolean is the plugin's fault. */
function guardMatch(plugin: string, hook: string, match: EventMatch): EventMatch {
  if (typeof match === 'string') return match;
  return function guardedMatch(event: SseEvent) {
    let result;
    try {
      result = match(event);
    } catch (error) {
      throw thrown(plugin, hook, error);
    }
    if (typeof result === 'boolean') return result;
    throw shapeFault(plugin, hook, result, `stream.${hook.slice(hook.lastIndexOf('.') + 1)} ${ADAPTER_SHAPES.match}`);
  };
}

function guardStream(plugin: string, at: string, stream: StreamMapping): StreamMapping {
  const { map, createState } = stream;
  const hook = `${at}.stream.map`;
  return {
    terminal: guardMatch(plugin, `${at}.stream.terminal`, stream.terminal),
    ...(stream.error === undefined ? {} : { error: guardMatch(plugin, `${at}.stream.error`, stream.error) }),
    ...(createState
      ? {
          createState(context: AdapterContext) {
            try {
              return createState(context);
            } catch (error) {
              throw thrown(plugin, `${at}.stream.createState`, error);
            }
          },
        }
      : {}),
    map(event, state, context) {
      let result;
      try {
        result = map(event, state, context);
      } catch (error) {
        throw thrown(plugin, hook, error);
      }
      if (result === undefined || result === null || isEvent(result)) return result;
      if (Array.isArray(result) && allEvents(result)) return result;
      throw shapeFault(plugin, hook, result, ADAPTER_SHAPES.map);
    },
  };
}

function guardUsage(plugin: string, at: string, usage: UsageExtractor): UsageExtractor {
  const { fromBody, fromStreamEvent } = usage;
  const bodyHook = `${at}.usage.fromBody`;
  const eventHook = `${at}.usage.fromStreamEvent`;
  return {
    fromBody(body: unknown) {
      let result;
      try {
        result = fromBody(body);
      } catch (error) {
        throw thrown(plugin, bodyHook, error);
      }
      if (result === undefined || isUsage(result)) return result;
      throw shapeFault(plugin, bodyHook, result, ADAPTER_SHAPES.usage);
    },
    fromStreamEvent(seen: TokenUsage | undefined, event: SseEvent) {
      let result;
      try {
        result = fromStreamEvent(seen, event);
      } catch (error) {
        throw thrown(plugin, eventHook, error);
      }
      if (result === seen || result === undefined || isUsage(result)) return result;
      throw shapeFault(plugin, eventHook, result, ADAPTER_SHAPES.usage);
    },
  };
}

/** Calls `hook`, naming a throw as the plugin's fault in `name`; `valid` checks what came back. */
function called<T>(
  plugin: string,
  name: string,
  shape: string,
  call: () => unknown,
  valid: (value: unknown) => boolean,
): T {
  let result;
  try {
    result = call();
  } catch (error) {
    throw thrown(plugin, name, error);
  }
  if (valid(result)) return result as T;
  throw shapeFault(plugin, name, result, shape);
}

/** One route's adapter with every hook guarded, its hooks named `routes.<route>.adapter.<hook>`. */
export function guardAdapter(
  plugin: string,
  routeId: UpstreamRouteId,
  route: UpstreamRoute,
  adapter: RouteAdapter,
): RouteAdapter {
  const at = `routes.${routeId}.adapter`;
  const { checkRequest, buildRequest, mapAnswer, mapError } = adapter;
  const credentials = credentialHeaderNames(route.auth);
  const isProblemsOrNone = (value: unknown) => value === undefined || isProblems(value);
  const isErrorOrNone = (value: unknown) => value === undefined || isAdaptedError(value);
  /** Calls one hook of this adapter, guarded. */
  type Named = 'checkRequest' | 'buildRequest' | 'mapAnswer' | 'mapError';
  const hook = <T>(name: Named, call: () => unknown, valid: (value: unknown) => boolean) =>
    called<T>(plugin, `${at}.${name}`, ADAPTER_SHAPES[name], call, valid);
  const isRequest = (value: unknown) => isAdaptedRequest(value, credentials);
  const guarded: RouteAdapter = {
    buildRequest: (request) => hook<AdaptedRequest>('buildRequest', () => buildRequest(request), isRequest),
    mapAnswer: (body, context) => hook<Record<string, unknown>>('mapAnswer', () => mapAnswer(body, context), isRecord),
    usage: guardUsage(plugin, at, adapter.usage),
  };
  return {
    ...guarded,
    ...(checkRequest && {
      checkRequest: (request: AdapterRequest) =>
        hook<readonly RequestProblem[] | undefined>('checkRequest', () => checkRequest(request), isProblemsOrNone),
    }),
    ...(adapter.stream && { stream: guardStream(plugin, at, adapter.stream) }),
    ...(mapError && {
      mapError: (error: { readonly status: number; readonly body: unknown }, context: AdapterContext) =>
        hook<AdaptedError | undefined>('mapError', () => mapError(error, context), isErrorOrNone),
    }),
  };
}

/** A plugin with the hooks of each route's adapter guarded (see `guardHooks` for the others). */
export function guardAdapters(plugin: ProviderPlugin): ProviderPlugin {
  const entries = Object.entries(plugin.routes) as [UpstreamRouteId, UpstreamRoute][];
  if (!entries.some(([, route]) => route.adapter)) return plugin;
  const guarded = ([id, route]: [UpstreamRouteId, UpstreamRoute]) =>
    route.adapter ? { ...route, adapter: guardAdapter(plugin.vendor, id, route, route.adapter) } : route;
  const routes = Object.fromEntries(entries.map((entry) => [entry[0], guarded(entry)]));
  return { ...plugin, routes };
}
