import type { UsageAccounting } from '../../core/exchange.ts';
import { endUserOf } from '../../core/incoming-request.ts';
import {
  upstreamNotConfigured,
  fieldError,
  isGatewayError,
  validationError,
  GatewayError,
} from '../../core/gateway-errors.ts';
import type { ModelRegistry, ResolvedModel } from '../../core/model-registry.ts';
import type { UpstreamRouteId } from '../../plugins/plugin-contract.ts';
import type { ProviderEndpoints } from '../upstream/endpoint-pool.ts';
import { assertModelAllowed, CompatibleCall, type CallCatalog } from '../upstream/upstream-client.ts';
import type { JsonRequestBody } from '../http/json-body.ts';
import type { FallbackTable } from '../routes/model-fallbacks.ts';
import type { Stage } from './exchange.ts';
import { routePath } from '../../core/route-table.ts';
import { FAST_CHECKS, NATIVE_CHAT_SCHEMA, REQUEST_SCHEMAS } from '../routes/request-schemas.ts';
import * as yup from 'yup';
import { fastCheckOf, type FastCheck } from '../routes/request-shapes.ts';

/** Makes a request's call on a forwarding route. */
type CallMaker = (
  catalog: CallCatalog,
  route: UpstreamRouteId,
  resolved: ResolvedModel,
  stream: boolean,
  client: () => JsonRequestBody,
) => CompatibleCall;

/** What the resolve stage uses: the catalog and endpoints in force, the route's check of its body. */
export interface ResolveParts {
  readonly registry: ModelRegistry;
  readonly endpoints: ProviderEndpoints;
  readonly check: RequestCheck;
  /** On a route that forwards the client's body: the fallbacks and usage extractors its call reads. */
  readonly forward?: {
    readonly fallbacks: FallbackTable | undefined;
    readonly usage: Pick<UsageAccounting, 'extractor'>;
    /** Makes the call, where it may be another than the forwarded one (a route some plugin adapts). */
    readonly call?: CallMaker;
  };
}

/**
 * The resolve stage: the end user the request names (its body's `user` or `metadata.user_id`, else the
 * `x-gateway-end-user` header; a 400 naming a bad one), whose limits `reserve` reserves and whose usage record
 * carries it; the body checked (one 400 listing every bad field, the model included), the model
 * resolved (aliases to the newest concrete model), the caller's permission to use it, and the pool of
 * endpoints of its provider (a 502 saying what to set when there is none). On a forwarding route, the
 * call to forward: the client's bytes with the upstream's model in them.
 */
export function resolve(parts: ResolveParts): Stage {
  const { registry, endpoints, forward } = parts;
  const catalog: CallCatalog | undefined = forward && {
    registry,
    fallbacks: forward.fallbacks,
    usage: forward.usage,
    served: (name: string) => endpoints.pool(name) !== undefined,
  };
  return async function resolve(exchange, next) {
    const body = exchange.body!.body;
    exchange.endUser = endUserOf(exchange.route.endUserField, body, exchange.headers);
    const resolved = parts.check(registry, body);
    assertModelAllowed(exchange.caller, resolved.canonicalId);
    const vendor = resolved.plugin.vendor;
    const pool = endpoints.pool(vendor);
    if (!pool) throw upstreamNotConfigured(vendor, endpoints.envPrefix(vendor));
    exchange.requested = exchange.model = resolved;
    exchange.pool = pool;
    if (forward && catalog) {
      const route = exchange.route.id as UpstreamRouteId;
      const client = () => exchange.body!;
      const stream = body.stream === true;
      exchange.call = forward.call
        ? forward.call(catalog, route, resolved, stream, client)
        : new CompatibleCall(catalog, route, resolved, stream, client);
    }
    return next(exchange);
  };
}

/** A route's check of a parsed body: its model resolved, or one 400 listing every bad field. */
export type RequestCheck = (registry: ModelRegistry, body: Record<string, unknown>) => ResolvedModel;

/** The check of a compatible route: its schema (behind the fast accept check), the model among its fields. */
export function compatibleCheck(route: UpstreamRouteId): RequestCheck {
  return function checkCompatibleRequest(registry, body) {
    let resolved: ResolvedModel | undefined;
    validateRequest(
      REQUEST_SCHEMAS[route],
      body,
      () => {
        if (typeof body.model !== 'string') return undefined;
        try {
          resolved = registry.resolve(route, body.model);
          return undefined;
        } catch (error) {
          if (isGatewayError(error)) return error;
          throw error;
        }
      },
      FAST_CHECKS[route],
    );
    return resolved!;
  };
}

const FIELDS = Object.keys(NATIVE_CHAT_SCHEMA.fields);
const STREAMING_ROUTES = [routePath('chat-completions'), routePath('responses'), routePath('messages')].join(', ');
/** Suffixes of the web chat's presets, which are not API model IDs. */
const PRESET_SUFFIX = /^(.+?)[-_:. ]?(thinking|think|reasoning|fast|instant)$/i;

/** Why a model ID is refused on the native route: a web-chat preset gets a pointer to the real IDs. */
function modelProblem(registry: ModelRegistry, id: string): GatewayError | undefined {
  try {
    registry.resolve('chat', id);
    return undefined;
  } catch (error) {
    if (!isGatewayError(error)) throw error;
    const preset = PRESET_SUFFIX.exec(id);
    if (!preset) return error;
    let base: ResolvedModel;
    try {
      base = registry.resolve('chat', preset[1]!);
    } catch {
      return error;
    }
    const aliases = (base.plugin.aliases ?? [])
      .filter((alias) => alias.routes.includes('chat'))
      .map((alias) => `'${alias.id}'`);
    const use = [...aliases, `a concrete ID such as '${base.canonicalId}'`].join(' or ');
    return validationError(
      [
        fieldError(
          'model',
          `'${id}' is a web chat preset, not a model ID; use ${use} (this route always uses the low reasoning preset)`,
        ),
      ],
      'model',
    );
  }
}

/**
 * The check of `POST /v1/chat`: its fields only, a web chat preset named as such, web search only where the model has
 * it.
 */
export function checkNativeChat(registry: ModelRegistry, body: Record<string, unknown>): ResolvedModel {
  const unknown = Object.keys(body).filter((key) => !FIELDS.includes(key));
  validateRequest(NATIVE_CHAT_SCHEMA, body, () => {
    const errors = unknown.map((key) =>
      key === 'stream'
        ? fieldError('stream', `is not accepted: ${routePath('chat')} never streams; use ${STREAMING_ROUTES} for SSE`)
        : fieldError(key, 'is not a field of this route'),
    );
    const model = typeof body.model === 'string' ? modelProblem(registry, body.model) : undefined;
    errors.push(...(model?.errors ?? []));
    if (body.web_search === true && typeof body.model === 'string' && !model) {
      const resolved = registry.resolve('chat', body.model);
      if (!resolved.model.webSearch)
        errors.push(
          fieldError(
            'web_search',
            `the model '${resolved.canonicalId}' has no web search tool; drop the field or pick a model that has one`,
          ),
        );
    }
    return errors.length ? validationError(errors) : undefined;
  });
  return registry.resolve('chat', body.model as string);
}

/** yup's `messages[0].role` / `messages["a"]` paths, as the client wrote the body. */
function location(path: string | undefined): string {
  return path ? path.replace(/\["([^"]+)"\]/g, '.$1') : 'body';
}

/** Most bad items of one array a ValidationError lists; yup builds each error slowly, so more are only counted. */
export const LISTED_BAD_ITEMS = 50;

const joinPath = (prefix: string, path: string | undefined) =>
  !path ? prefix : !prefix || path.startsWith('[') ? prefix + path : `${prefix}.${path}`;

// Adds each of yup's problems as a field error; returns the first one's location.
function collect(error: unknown, errors: string[], prefix = ''): string {
  if (!(error instanceof yup.ValidationError)) throw error;
  const inner = error.inner.length ? error.inner : [error];
  for (const problem of inner) errors.push(fieldError(location(joinPath(prefix, problem.path)), problem.message));
  return location(joinPath(prefix, inner[0]?.path));
}

/**
 * yup's errors for a body the fast check refused, with at most {@link LISTED_BAD_ITEMS} bad items per
 * long array: the array's head goes through the schema with the rest of the body, and further bad
 * items (found by the item check) through the item schema, until the cap; the others are counted.
 */
function schemaErrors(
  schema: yup.AnyObjectSchema,
  body: Record<string, unknown>,
  fast: FastCheck | undefined,
  errors: string[],
): string | undefined {
  const head: Record<string, unknown> = { ...body };
  const beyondHead: { key: string; items: unknown[]; ok: (item: unknown) => boolean }[] = [];
  for (const [key, ok] of Object.entries(fast?.items ?? {})) {
    const items = body[key];
    if (!Array.isArray(items) || items.length <= LISTED_BAD_ITEMS) continue;
    head[key] = items.slice(0, LISTED_BAD_ITEMS);
    beyondHead.push({ key, items, ok });
  }
  let param: string | undefined;
  try {
    schema.validateSync(head, { abortEarly: false, strict: true });
  } catch (error) {
    param = collect(error, errors);
  }
  for (const { key, items, ok } of beyondHead) {
    const itemSchema = (schema.fields[key] as yup.ArraySchema<unknown[], yup.AnyObject>).innerType as yup.Schema;
    let listed = items.slice(0, LISTED_BAD_ITEMS).filter((item) => !ok(item)).length;
    let unlisted = 0;
    for (let index = LISTED_BAD_ITEMS; index < items.length; index++) {
      if (ok(items[index])) continue;
      if (listed >= LISTED_BAD_ITEMS) {
        unlisted++;
        continue;
      }
      listed++;
      try {
        itemSchema.validateSync(items[index], { abortEarly: false, strict: true });
      } catch (error) {
        const first = collect(error, errors, `${key}[${index}]`);
        param ??= first;
      }
    }
    if (unlisted)
      errors.push(
        fieldError(key, `${unlisted} more items are invalid (only the first ${LISTED_BAD_ITEMS} are listed)`),
      );
  }
  return param;
}

/**
 * Checks a body against a schema and collects every bad field (abortEarly off; at most
 * {@link LISTED_BAD_ITEMS} bad items per array), then runs `extraChecks` (e.g. the model lookup) so
 * one 400 lists all problems at once. yup runs only on bodies the fast check (by default the one
 * derived from the schema) refuses, to name the bad fields in yup's words.
 */
export function validateRequest(
  schema: yup.AnyObjectSchema,
  body: Record<string, unknown>,
  extraChecks: () => GatewayError | undefined = () => undefined,
  fast: FastCheck = fastCheckOf(schema),
): void {
  const errors: string[] = [];
  let param: string | undefined;
  if (!fast.accepts(body)) {
    param = schemaErrors(schema, body, fast, errors);
    // A fast check that refused what the schema accepts would be a bug; the schema has the last word.
    if (!errors.length) param = schemaErrors(schema, body, undefined, errors);
  }
  const extra = extraChecks();
  if (extra?.errors) {
    errors.push(...extra.errors.filter((entry) => !errors.includes(entry)));
    param ??= extra.param;
  }
  if (errors.length) throw validationError(errors, param);
}
