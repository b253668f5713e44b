import type { ModelRegistry, ResolvedModel } from '../../core/model-registry.ts';
import type { NativeChatAdapter, UpstreamRoute } from '../../plugins/plugin-contract.ts';
import { upstreamJson } from '../../plugins/plugin-fault.ts';
import type { FailoverPlan } from '../upstream/endpoint-pool.ts';
import type { RetryPolicy } from '../upstream/failover/retry-policy.ts';
import type { RoutingSession } from '../upstream/session-affinity.ts';

/** One `/v1/chat` request as sent upstream: the adapter's body, its route, and its time bounds. */
export interface ChatCall {
  readonly provider: string;
  readonly adapter: NativeChatAdapter;
  readonly upstreamRoute: UpstreamRoute;
  /** The model ID the provider is sent (`gen_ai.request.model`). */
  readonly upstreamModel: string;
  readonly upstreamBody: Record<string, unknown>;
  readonly payload: string;
  readonly requestId: string | undefined;
  /** Each attempt's bound: the gateway's upstream timeout, shortened by the caller's `timeout`. */
  readonly attemptTimeoutMs: number;
  /** `max_retries` + 1 attempts, waiting between rounds, all before the deadline. */
  readonly plan: FailoverPlan & { readonly retry: { readonly deadline: number } };
}

/**
 * The adapter's request for the validated body, and the retries and timeouts the caller asked for;
 * `session` picks the endpoints when the pool keeps sessions on one endpoint.
 */
export function chatCall(
  registry: ModelRegistry,
  resolved: ResolvedModel,
  body: Record<string, unknown>,
  request: { readonly requestId: string | undefined; readonly startedAt: number; readonly caller?: string },
  policy: RetryPolicy,
  gatewayTimeoutMs: number,
  session: RoutingSession | undefined,
  onFailure: FailoverPlan['onFailure'],
): ChatCall {
  const { requestId, startedAt, caller } = request;
  const adapter = resolved.plugin.nativeChat!;
  const upstreamModel = registry.upstreamModel(resolved, 'chat');
  const upstreamBody = adapter.buildRequest({
    upstreamModel,
    input: body.input as string,
    temperature: body.temperature as number | undefined,
    maxOutputTokens: body.max_output_tokens as number | undefined,
    webSearch: body.web_search === true,
  });
  const maxRetries = (body.max_retries as number | undefined) ?? policy.defaultMaxRetries;
  return {
    provider: resolved.plugin.vendor,
    adapter,
    upstreamRoute: resolved.plugin.routes[adapter.route]!,
    upstreamModel,
    upstreamBody,
    payload: upstreamJson(resolved.plugin.vendor, upstreamBody),
    requestId,
    attemptTimeoutMs:
      body.timeout === undefined
        ? gatewayTimeoutMs
        : Math.min(gatewayTimeoutMs, Math.ceil((body.timeout as number) * 1000)),
    plan: {
      maxAttempts: maxRetries + 1,
      retry: { policy, deadline: startedAt + policy.deadlineMs },
      caller,
      session,
      onFailure,
    },
  };
}
