import { usageOf, type AnswerOptions, type MockAnswer, type MockEvent, type WireFormat } from './mock-answer.ts';

/**
 * Messages counts the prompt in three separate parts: uncached input + cache writes + cache reads.
 * Without cache reads, a few tokens are written to the cache, so the three parts are all exercised.
 */
function inputParts(answer: MockAnswer) {
  const cacheCreation = answer.cachedTokens > 0 ? 0 : Math.min(4, answer.inputTokens);
  return {
    input_tokens: answer.inputTokens - answer.cachedTokens - cacheCreation,
    cache_creation_input_tokens: cacheCreation,
    cache_read_input_tokens: answer.cachedTokens,
  };
}

function message(answer: MockAnswer, options: AnswerOptions, content: unknown[], stopReason: string | null, outputTokens: number) {
  return {
    id: `msg_${answer.id}`,
    type: 'message',
    role: 'assistant',
    model: answer.model,
    content,
    stop_reason: stopReason,
    stop_sequence: null,
    ...(options.withUsage ? { usage: { ...inputParts(answer), output_tokens: outputTokens } } : {}),
  };
}

function json(answer: MockAnswer, options: AnswerOptions): unknown {
  return message(answer, options, [{ type: 'text', text: answer.pieces.join('') }], 'end_turn', answer.outputTokens);
}

function events(answer: MockAnswer, options: AnswerOptions): MockEvent[] {
  const event = (type: string, fields: Record<string, unknown>): MockEvent => ({ event: type, data: { type, ...fields } });
  const withUsage = (mock: MockEvent, outputTokens: number): MockEvent => (options.withUsage ? { ...mock, usage: { ...usageOf(answer), outputTokens } } : mock);
  const usage = (fields: Record<string, unknown>) => (options.withUsage ? { usage: fields } : {});
  const half = Math.ceil(answer.outputTokens / 2);
  return [
    withUsage(event('message_start', { message: message(answer, options, [], null, 1) }), 1),
    event('content_block_start', { index: 0, content_block: { type: 'text', text: '' } }),
    event('ping', {}),
    ...answer.pieces.map((piece) => event('content_block_delta', { index: 0, delta: { type: 'text_delta', text: piece } })),
    event('content_block_stop', { index: 0 }),
    // Two message_delta events, both with cumulative totals: a consumer that adds them counts the output twice.
    withUsage(event('message_delta', { delta: { stop_reason: null, stop_sequence: null }, ...usage({ output_tokens: half }) }), half),
    withUsage(
      event('message_delta', { delta: { stop_reason: 'end_turn', stop_sequence: null }, ...usage({ ...inputParts(answer), output_tokens: answer.outputTokens }) }),
      answer.outputTokens,
    ),
    event('message_stop', {}),
  ];
}

function error(status: number, message: string, requestId: string): unknown {
  const types: Record<number, string> = {
    400: 'invalid_request_error',
    401: 'authentication_error',
    403: 'permission_error',
    404: 'not_found_error',
    413: 'request_too_large',
    429: 'rate_limit_error',
    529: 'overloaded_error',
  };
  return { type: 'error', error: { type: types[status] ?? (status >= 500 ? 'api_error' : 'invalid_request_error'), message }, request_id: requestId };
}

/** Anthropic Messages, `POST /v1/messages` (and the error shape of `count_tokens`). */
export const messagesFormat: WireFormat = { requestIdHeader: 'request-id', json, events, error };
