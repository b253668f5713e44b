import { EVENTS, type AttemptStartMessage } from '../../core/diagnostics.ts';
import type { ExchangeView } from '../../core/exchange.ts';
import type { PooledEndpoint } from '../upstream/endpoint-pool.ts';
import type { FailoverPlan } from '../upstream/failover/attempt-upstream.ts';
import { outputCapOf } from './output-caps.ts';

/** Opens one attempt's event: the endpoint, the model sent and the serving model; gives the message back. */
export type AttemptSide = (
  member: PooledEndpoint,
  requestModel: string,
  model: string,
) => AttemptStartMessage | undefined;

const numberOf = (value: unknown): number | undefined =>
  typeof value === 'number' && Number.isFinite(value) ? value : undefined;

type Messages = NonNullable<AttemptStartMessage['inputMessages']>;

/**
 * The request's side of its attempt events (the GenAI operation, whether it streams, the sampling
 * parameters it sent and, only when a subscriber asked for content, its messages), read once from the
 * parsed body; undefined while nobody subscribes to attempts, so that attempts build no message.
 */
export function attemptStart(
  exchange: ExchangeView & { readonly body?: { readonly body: Record<string, unknown> } },
  stream: boolean,
  messagesOf: (body: Record<string, unknown>) => ReturnType<Messages>,
): AttemptSide | undefined {
  if (!EVENTS.attemptStart.active) return undefined;
  const body = exchange.body?.body ?? {};
  const { route } = exchange;
  const captured = exchange.watch.content ? messagesOf(body) : undefined;
  const request = {
    operation: route.genAiOperation,
    stream,
    maxTokens: route.outputCapFields && outputCapOf(body, route.outputCapFields),
    temperature: numberOf(body.temperature),
    topP: numberOf(body.top_p),
    ...(captured && { inputMessages: () => captured }),
  };
  return (member, requestModel, model) => {
    const { endpoint } = member;
    const message: AttemptStartMessage = {
      exchange,
      ...request,
      provider: endpoint.provider,
      requestModel,
      model,
      endpoint: member.name,
      origin: endpoint.origin,
    };
    EVENTS.attemptStart.publish(message);
    return message;
  };
}

/** A failover plan's `onFailure` for one exchange: the endpoint's failure as an event (the failover warning). */
export function endpointFailed(exchange: ExchangeView): FailoverPlan['onFailure'] {
  return (failed) => {
    if (EVENTS.endpointFailed.active) EVENTS.endpointFailed.publish({ exchange, ...failed });
  };
}
