import { upstreamResting } from '../../core/gateway-errors.ts';
import type { ModelRegistry } from '../../core/model-registry.ts';
import { isPluginFault } from '../../plugins/plugin-fault.ts';
import { attemptUpstream, ClientWatch, attemptStart, endpointFailed } from '../upstream/endpoint-pool.ts';
import type { RetryPolicy } from '../upstream/failover/retry-policy.ts';
import { requestSession } from '../upstream/session-affinity.ts';
import type { UpstreamClient } from '../upstream/upstream-client.ts';
import { chatCall, type ChatCall } from '../routes/chat-call.ts';
import { attemptChat } from '../routes/native-chat-upstream.ts';
import { faultOf } from '../routes/plugin-faults.ts';
import type { Exchange, Stage } from './exchange.ts';

/** What the native chat's attempt stage uses: the catalog, the upstream client, the retries and bounds. */
export interface ChatAttemptParts {
  readonly registry: ModelRegistry;
  readonly upstream: UpstreamClient;
  readonly policy: RetryPolicy;
  /** Largest upstream JSON answer the gateway reads, in bytes. */
  readonly bodyLimitBytes: number;
}

/** The stable prefix of a `/v1/chat` request, for prompt-cache-aware routing: its one `input` is its whole prompt. */
const nativePrefix = (body: Record<string, unknown>): readonly unknown[] => [body.input];

/**
 * The attempt stage of `POST /v1/chat`: the model's plugin adapter builds the upstream request (with
 * the provider's low reasoning preset), then `max_retries` + 1 attempts over the endpoints, waiting
 * between rounds, all before the deadline and each within the caller's `timeout`. An adapter that fails
 * to build the request is a 502 naming the plugin, with nothing sent upstream.
 */
export function attemptChatStage(parts: ChatAttemptParts): Stage {
  return async function attempt(exchange, next) {
    const resolved = exchange.requested!;
    const pool = exchange.pool!;
    const body = exchange.body!.body;
    const session =
      pool.affinity && pool.endpoints.length > 1 ? requestSession(exchange.headers, body, nativePrefix) : undefined;
    const call = built(exchange, () =>
      chatCall(
        parts.registry,
        resolved,
        body,
        { requestId: exchange.requestId, startedAt: exchange.startedAt, caller: exchange.caller?.id },
        parts.policy,
        parts.upstream.timeoutMs,
        session,
        endpointFailed(exchange),
      ),
    );
    exchange.estimateBody = () => call.upstreamBody;
    exchange.upstream.spentMs = 0;
    const side = attemptStart(exchange, false, nativeMessages);
    const client = (exchange.client = new ClientWatch(exchange.res));
    const { tally } = exchange.upstream;
    const outcome = await attemptUpstream(pool, call.plan, client, tally, (member, signal) =>
      attemptChat(parts.upstream, parts.bodyLimitBytes, call, member, signal, exchange, side),
    );
    // A client that left while an attempt ran: the upstream had the prompt (its input is estimated).
    if (outcome.kind === 'client-gone') return exchange.end(499, undefined, tally.abandoned);
    if (outcome.kind === 'resting') throw exchange.fail(upstreamResting(call.provider, pool.retryAfterMs()));
    if (outcome.kind === 'failed') throw exchange.fail(outcome.failure);
    if (outcome.answer.failure) throw exchange.fail(outcome.answer.failure);
    exchange.chat = { call, body: outcome.answer.body, apiKey: outcome.endpoint.endpoint.apiKey };
    return next(exchange);
  };
}

/**
 * The adapter's request; its `buildRequest` failing (a throw, or a body of a shape the contract does not allow) ends
 * the exchange.
 */
function built(exchange: Exchange, build: () => ChatCall): ChatCall {
  try {
    return build();
  } catch (error) {
    if (isPluginFault(error))
      throw exchange.fail(faultOf(exchange, error, exchange.requested!.canonicalId), false, undefined, 'plugin_error');
    throw error;
  }
}

/** The native route's one input, as the GenAI conventions' messages. */
function nativeMessages(body: Record<string, unknown>) {
  return { messages: [{ role: 'user', parts: [{ type: 'text', content: body.input }] }] };
}
