import type { ModelRoute } from '../../core/route-table.ts';
import type { AttemptStart, RequestTrace } from '../../ops/tracing/request-trace.ts';
import type { PooledEndpoint } from '../upstream/endpoint-pool.ts';
import { outputCapOf } from './reserve-budget.ts';

/** What every attempt of a traced request opens its span with, read from the parsed body before it is dropped. */
export type TracedRequest = Pick<AttemptStart, 'operation' | 'stream' | 'maxTokens' | 'temperature' | 'topP' | 'inputMessages'>;

const numberOf = (value: unknown): number | undefined => (typeof value === 'number' && Number.isFinite(value) ? value : undefined);

/**
 * The request's side of its attempt spans: the GenAI operation, whether it streams, the sampling
 * parameters it sent and, only when the operator opted in to message capture, its messages. Undefined
 * when the request is not traced (or not sampled): its attempts then open no span.
 */
export function tracedRequest(
  trace: RequestTrace | undefined,
  route: ModelRoute,
  body: Record<string, unknown>,
  stream: boolean,
  messagesOf: (body: Record<string, unknown>) => ReturnType<NonNullable<AttemptStart['inputMessages']>>,
): TracedRequest | undefined {
  if (!trace?.recording) return undefined;
  const captured = trace.capturesContent ? messagesOf(body) : undefined;
  return {
    operation: route.genAiOperation,
    stream,
    maxTokens: route.outputCapFields && outputCapOf(body, route.outputCapFields),
    temperature: numberOf(body.temperature),
    topP: numberOf(body.top_p),
    ...(captured && { inputMessages: () => captured }),
  };
}

/** Opens the span of one attempt at `member` (a `traceparent` alone when the request is not sampled). */
export function traceAttempt(trace: RequestTrace | undefined, request: TracedRequest | undefined, member: PooledEndpoint, requestModel: string, model: string) {
  if (trace === undefined) return undefined;
  const { endpoint } = member;
  return trace.attempt({ operation: 'chat', stream: false, ...request, provider: endpoint.provider, requestModel, model, endpoint: member.name, origin: endpoint.origin });
}
