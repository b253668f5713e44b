import type { UsageAccounting } from '../core/exchange.ts';
import type { ModelRegistry } from '../core/model-registry.ts';
import { ROUTE_TABLE } from '../core/route-table.ts';
import type { GuardrailSet } from '../guardrails/guardrail-set.ts';
import type { RouteId, UpstreamRouteId } from '../plugins/plugin-contract.ts';
import { type KeyAuthenticator, authenticate } from './pipeline/authenticate.ts';
import type { ResponseCaching } from './cache/response-caching.ts';
import { type BudgetGate, reserve } from './pipeline/reserve.ts';
import { callOnAdaptedRoute } from './adapters/adapted-call.ts';
import { adapt } from './pipeline/adapt.ts';
import { admit, type AdmitParts } from './pipeline/admit.ts';
import { pipeline, type Next, type Stage } from './pipeline/exchange.ts';
import { answerChat } from './pipeline/answer-chat.ts';
import { attemptChatStage } from './pipeline/attempt-chat.ts';
import { attempt } from './pipeline/attempt.ts';
import { cache } from './pipeline/cache.ts';
import { guardRequest, nativeFormat, nativeInput } from './pipeline/guard-request.ts';
import { readBody } from './pipeline/read-body.ts';
import { record } from './pipeline/record.ts';
import { relay } from './pipeline/relay.ts';
import { relayAdapted } from './pipeline/relay-adapted.ts';
import { resolve, checkNativeChat, compatibleCheck } from './pipeline/resolve.ts';
import type { UpstreamBounds } from './routes/compatible-answer.ts';
import type { FallbackTable } from './routes/model-fallbacks.ts';
import type { RetryPolicy } from './upstream/failover/retry-policy.ts';
import type { ProviderEndpoints } from './upstream/endpoint-pool.ts';
import type { UpstreamClient } from './upstream/upstream-client.ts';

/** Everything the model routes' stages are made from: fixed at start, or the configuration in force when built. */
export interface ModelRouteParts {
  readonly registry: ModelRegistry;
  readonly endpoints: ProviderEndpoints;
  readonly fallbacks: FallbackTable | undefined;
  readonly upstream: UpstreamClient;
  readonly usage: UsageAccounting;
  readonly bounds: UpstreamBounds;
  readonly bodyLimitBytes: number;
  /** Longest a client may leave its answer unread before the answer is ended and its upstream dropped, in ms. */
  readonly clientWriteTimeoutMs: number;
  /** The caller, or 401/403/429/503; none means the routes are open (tests only). */
  readonly authenticate?: Pick<KeyAuthenticator, 'check'>;
  /** The concurrency cap and request rate; none of either: not counted (tests only). */
  readonly admission?: AdmitParts;
  /** Reserves on token and money limits; none when limits are off (tests). */
  readonly budgets?: Pick<BudgetGate, 'admit'>;
  /** `POST /v1/chat`'s retries and deadline; none: the route is not served. */
  readonly nativeChat?: RetryPolicy;
}

/**
 * What the configuration in force turns on: the response cache (while it has a TTL) and the guardrails (while any is
 * configured).
 */
export interface ModelRouteSettings {
  readonly caching?: ResponseCaching;
  readonly guardrails?: GuardrailSet;
}

const COMPATIBLE_ROUTES: readonly UpstreamRouteId[] = ['chat-completions', 'messages', 'count-tokens', 'responses'];

/**
 * Each model route's stages, in order. Built once per configuration (again on a reload): a stage that is
 * off for a route or the configuration is not in its list.
 *
 *   compatible: authenticate, admit, readBody, resolve, record, [guardRequest], [cache], [reserve], attempt, relay
 *   adapted:    authenticate, admit, readBody, resolve, record, [guardRequest], adapt → the route's own rest, or
 *               [cache], [reserve], attempt, relayAdapted (on a route some loaded plugin adapts)
 *   /v1/chat:   authenticate, admit, readBody, resolve, record, [guardRequest], reserve, attempt, answer
 */
export function stageLists(parts: ModelRouteParts, settings: ModelRouteSettings): Map<RouteId, Stage[]> {
  const { registry, endpoints, usage, bounds, clientWriteTimeoutMs } = parts;
  const set = settings.guardrails;
  const reserving = reserve({ budgets: parts.budgets, registry, fallbacks: parts.fallbacks });
  const lists = new Map<RouteId, Stage[]>();
  for (const route of COMPATIBLE_ROUTES) lists.set(route, compatibleStages(route, parts, settings, reserving));
  if (parts.nativeChat) {
    lists.set('chat', [
      ...headStages(parts, false),
      resolve({ registry, endpoints, check: checkNativeChat }),
      record(usage),
      ...(set ? [guardRequest({ guardrails: set, format: nativeFormat, texts: nativeInput })] : []),
      reserving,
      attemptChatStage({
        registry,
        upstream: parts.upstream,
        policy: parts.nativeChat,
        bodyLimitBytes: bounds.bodyLimitBytes,
      }),
      answerChat({ usage, clientWriteTimeoutMs }),
    ]);
  }
  return lists;
}

/** The stages every model route opens with: authenticate and admit (each while its part is given), readBody. */
function headStages(parts: ModelRouteParts, forwardsBytes: boolean): Stage[] {
  return [
    ...(parts.authenticate ? [authenticate(parts.authenticate)] : []),
    ...(parts.admission && (parts.admission.concurrency || parts.admission.rateLimit) ? [admit(parts.admission)] : []),
    readBody(parts.bodyLimitBytes, forwardsBytes),
  ];
}

/** One compatible route's stages: its one list, or on a route some plugin adapts the fork after the guardrails. */
function compatibleStages(
  route: UpstreamRouteId,
  parts: ModelRouteParts,
  settings: ModelRouteSettings,
  reserving: Stage,
): Stage[] {
  const { registry, endpoints, usage, bounds, clientWriteTimeoutMs } = parts;
  const generates = route !== 'count-tokens';
  const answer = (relaying: Stage): Stage[] => [
    ...(settings.caching && generates ? [cache({ caching: settings.caching, usage, clientWriteTimeoutMs })] : []),
    ...(ROUTE_TABLE[route].outputCapFields ? [reserving] : []),
    attempt({ upstream: parts.upstream, endpoints, bounds }),
    relaying,
  ];
  const relaying = relay({ usage, bounds, clientWriteTimeoutMs });
  // A route some plugin adapts forks after the request guardrails; any other keeps its one list.
  const adapted = registry.plugins.some((plugin) => plugin.routes[route]?.adapter);
  const forward = { fallbacks: parts.fallbacks, usage, ...(adapted && { call: callOnAdaptedRoute }) };
  const relayingAdapted = relayAdapted({ usage, bounds, clientWriteTimeoutMs });
  const rest = adapted
    ? [adapt({ native: pipeline(answer(relaying)), adapted: pipeline(answer(relayingAdapted)) })]
    : answer(relaying);
  return [
    ...headStages(parts, true),
    resolve({ registry, endpoints, check: compatibleCheck(route), forward }),
    record(usage),
    ...(settings.guardrails ? [guardRequest({ guardrails: settings.guardrails })] : []),
    ...rest,
  ];
}

/** Each model route's pipeline (see {@link stageLists}). */
export function modelRoutes(parts: ModelRouteParts, settings: ModelRouteSettings): Map<RouteId, Next> {
  const routes = new Map<RouteId, Next>();
  for (const [route, stages] of stageLists(parts, settings)) routes.set(route, pipeline(stages));
  return routes;
}
