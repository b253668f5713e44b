import { routePath } from '../../core/route-table.ts';
import type { ModelHandler } from '../request-context.ts';
import { fieldError, isGatewayError, upstreamResting, validationError, type GatewayError } from '../../core/gateway-errors.ts';
import { endForClient } from '../http/client-write-timeout.ts';
import { readJsonObject } from '../http/json-body.ts';
import type { ModelRegistry, ResolvedModel } from '../../core/model-registry.ts';
import { attemptUpstream } from '../upstream/failover/attempt-upstream.ts';
import { ClientWatch } from '../upstream/failover/client-watch.ts';
import { backoffMs, DEFAULT_RETRY_POLICY, retryAfterMs, type RetryPolicy } from '../upstream/failover/retry-policy.ts';
import { requestSession } from '../upstream/session-affinity.ts';
import { admitCaller, poolFor } from './compatible-route.ts';
import { isPluginFault, type PluginFault } from '../../plugins/plugin-fault.ts';
import { reportPluginFault } from './plugin-faults.ts';
import { ExchangeRecorder, type ExchangeBasis } from './exchange-recorder.ts';
import { attemptChat, chatCall, chatResult, type ChatCall } from './native-chat-upstream.ts';
import type { RouteServices } from '../route-services.ts';
import { NATIVE_CHAT_SCHEMA } from './request-schemas.ts';
import { validateRequest } from './validate-request.ts';
import { reserveBudget } from './reserve-budget.ts';
import { guardChatInput } from '../guardrails/request-guard.ts';
import { guardChatPayload } from '../guardrails/answer-guard.ts';
import { tracedRequest } from './attempt-tracing.ts';

export { backoffMs, DEFAULT_RETRY_POLICY, retryAfterMs, type RetryPolicy };

export { MAX_RETRIES_CAP } from './request-schemas.ts';

const FIELDS = Object.keys(NATIVE_CHAT_SCHEMA.fields);
const STREAMING_ROUTES = [routePath('chat-completions'), routePath('responses'), routePath('messages')].join(', ');
/** The stable prefix of a `/v1/chat` request, for prompt-cache-aware routing: its one `input` is its whole prompt. */
const nativePrefix = (body: Record<string, unknown>): readonly unknown[] => [body.input];
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
    const aliases = (base.plugin.aliases ?? []).filter((alias) => alias.routes.includes('chat')).map((alias) => `'${alias.id}'`);
    const use = [...aliases, `a concrete ID such as '${base.canonicalId}'`].join(' or ');
    return validationError([fieldError('model', `'${id}' is a web chat preset, not a model ID; use ${use} (this route always uses the low reasoning preset)`)], 'model');
  }
}

function validate(registry: ModelRegistry, body: Record<string, unknown>): ResolvedModel {
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
      if (!resolved.model.webSearch) errors.push(fieldError('web_search', `the model '${resolved.canonicalId}' has no web search tool; drop the field or pick a model that has one`));
    }
    return errors.length ? validationError(errors) : undefined;
  });
  return registry.resolve('chat', body.model as string);
}

/**
 * The adapter's request. Its `buildRequest` failing (a throw, or a body of a shape the contract does
 * not allow) is a 502 naming the plugin, recorded with outcome `plugin_error` and no tokens: nothing
 * went upstream.
 */
function nativeCall(build: () => ChatCall, failed: (fault: PluginFault) => never): ChatCall {
  try {
    return build();
  } catch (error) {
    if (isPluginFault(error)) return failed(error);
    throw error;
  }
}

/**
 * `POST /v1/chat`: plain text in, plain text out, never streamed. The core owns validation, retries,
 * timeouts and usage; the model's plugin adapter owns only the mapping to its upstream format (always
 * with the provider's low reasoning preset).
 */
export function nativeChatRoute(services: RouteServices, policy: RetryPolicy = DEFAULT_RETRY_POLICY): ModelHandler {
  return async function handleNativeChat(req, res, context) {
    const startedAt = performance.now();
    const body = await readJsonObject(req, services.bodyLimitBytes);
    const registry = services.registry();
    const resolved = validate(registry, body);
    const caller = admitCaller(context, resolved);
    const pool = poolFor(services, resolved);
    // Request guardrails: before any reservation or upstream call; a redaction rewrites `input`.
    const guarding = guardChatInput(services, context, resolved, body, startedAt);
    if (guarding) await guarding;
    const reserving = reserveBudget(services, context, res, resolved, body);
    if (reserving) await reserving;
    const session = pool.affinity && pool.endpoints.length > 1 ? requestSession(req.headers, body, nativePrefix) : undefined;
    const call = nativeCall(
      () => chatCall(services, registry, resolved, body, context.requestId, policy, startedAt, caller?.id, session),
      (fault) => {
        const basis: ExchangeBasis = { keyId: caller?.id, route: 'chat', stream: false, requestId: context.requestId, startedAt, requestBody: () => body, responseText: () => '' };
        const recorder = new ExchangeRecorder(services, context, basis, resolved);
        return recorder.fail(reportPluginFault(services, fault, recorder.faultSite('chat')), false, undefined, 'plugin_error');
      },
    );
    const recorder = new ExchangeRecorder(services, context, chatBasis(caller?.id, call, startedAt), resolved);
    recorder.upstreamSpentMs = 0;
    const traced = tracedRequest(context.trace, context.route, body, false, nativeMessages);
    const client = new ClientWatch(res);
    const outcome = await attemptUpstream(pool, call.plan, client, recorder.tally, (member, signal) => attemptChat(services, call, member, signal, recorder, traced));
    // A client that left while an attempt ran: the upstream had the prompt (its input is estimated).
    if (outcome.kind === 'client-gone') return recorder.record(499, undefined, recorder.tally.abandoned);
    if (outcome.kind === 'resting') return recorder.fail(upstreamResting(call.provider, pool.retryAfterMs()));
    if (outcome.kind === 'failed') return recorder.fail(outcome.failure);
    if (outcome.answer.failure) return recorder.fail(outcome.answer.failure);
    const { payload: unguarded, usage } = chatResult(services, call, resolved, outcome.answer.body, outcome.endpoint.endpoint.apiKey, recorder);
    // Response guardrails on the answer's text: a block is recorded (billed as the upstream billed it) and thrown.
    const answering = guardChatPayload(services, recorder, unguarded, usage);
    const payload = answering instanceof Promise ? await answering : answering;
    recorder.firstByteAt = performance.now();
    res.writeHead(200, { 'content-type': 'application/json; charset=utf-8', 'content-length': payload.length });
    recorder.recordEnd(await endForClient(res, payload, services.clientWriteTimeoutMs), 200, usage, true);
  };
}

/** The native route's one input, as the GenAI conventions' messages. */
function nativeMessages(body: Record<string, unknown>) {
  return { messages: [{ role: 'user', parts: [{ type: 'text', content: body.input }] }] };
}

function chatBasis(keyId: string | undefined, call: ChatCall, startedAt: number): ExchangeBasis {
  return { keyId, route: 'chat', stream: false, requestId: call.requestId, startedAt, requestBody: () => call.upstreamBody, responseText: () => '' };
}
