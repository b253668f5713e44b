import { fieldError, isGatewayError, validationError, type GatewayError } from '../../core/gateway-errors.ts';
import type { ModelRegistry, ResolvedModel } from '../../core/model-registry.ts';
import { routePath } from '../../core/route-table.ts';
import type { UpstreamRouteId } from '../../plugins/plugin-contract.ts';
import { FAST_CHECKS, NATIVE_CHAT_SCHEMA, REQUEST_SCHEMAS } from './request-schemas.ts';
import { validateRequest } from './validate-request.ts';

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
