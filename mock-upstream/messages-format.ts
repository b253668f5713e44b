import {
  chooseIntent,
  isObject,
  resultText,
  usageOf,
  type AnswerOptions,
  type IntentFields,
  type MockAnswer,
  type MockEvent,
  type RequestIntent,
  type WireFormat,
} from './mock-answer.ts';

/**
 * Client tools (those with an `input_schema`; server tools such as web search run upstream),
 * `tool_choice`, a last user turn of `tool_result` blocks, `output_config.format` (or the older
 * `output_format`) for structured output.
 */
function intent(body: Record<string, unknown>): RequestIntent {
  const tools = (Array.isArray(body.tools) ? body.tools : [])
    .filter(
      (tool) =>
        isObject(tool) &&
        typeof tool.name === 'string' &&
        isObject(tool.input_schema) &&
        (tool.type === undefined || tool.type === 'custom'),
    )
    .map((tool) => ({ name: tool.name as string, parameters: tool.input_schema }));
  const choice = isObject(body.tool_choice) ? body.tool_choice : {};
  const last = Array.isArray(body.messages) ? body.messages.at(-1) : undefined;
  const results =
    isObject(last) && last.role === 'user' && Array.isArray(last.content)
      ? last.content.filter((block: unknown) => isObject(block) && block.type === 'tool_result')
      : [];
  const format = [isObject(body.output_config) ? body.output_config.format : undefined, body.output_format].find(
    (entry) => isObject(entry) && entry.type === 'json_schema',
  ) as { schema?: unknown } | undefined;
  return chooseIntent({
    tools,
    choice: (choice.type === 'none'
      ? 'none'
      : choice.type === 'any'
        ? 'required'
        : choice.type === 'tool' && typeof choice.name === 'string'
          ? { name: choice.name }
          : 'auto') as IntentFields['choice'],
    ...(results.length > 0
      ? { toolResult: results.map((block: Record<string, unknown>) => resultText(block.content)).join('\n') }
      : {}),
    ...(format ? { schema: format.schema ?? {} } : {}),
  });
}

const toolUseId = (answer: MockAnswer) => `toolu_01${answer.toolCall!.callId.slice(0, 22)}`;

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

function message(
  answer: MockAnswer,
  options: AnswerOptions,
  content: unknown[],
  stopReason: string | null,
  outputTokens: number,
) {
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
  const call = answer.toolCall;
  return call
    ? message(
        answer,
        options,
        [{ type: 'tool_use', id: toolUseId(answer), name: call.name, input: JSON.parse(call.arguments) }],
        'tool_use',
        answer.outputTokens,
      )
    : message(answer, options, [{ type: 'text', text: answer.pieces.join('') }], 'end_turn', answer.outputTokens);
}

function events(answer: MockAnswer, options: AnswerOptions): MockEvent[] {
  const event = (type: string, fields: Record<string, unknown>): MockEvent => ({
    event: type,
    data: { type, ...fields },
  });
  const withUsage = (mock: MockEvent, outputTokens: number): MockEvent =>
    options.withUsage ? { ...mock, usage: { ...usageOf(answer), outputTokens } } : mock;
  const usage = (fields: Record<string, unknown>) => (options.withUsage ? { usage: fields } : {});
  const half = Math.ceil(answer.outputTokens / 2);
  const call = answer.toolCall;
  // A tool call streams its input as partial JSON, starting with an empty piece as the real API does.
  const block = call
    ? [
        event('content_block_start', {
          index: 0,
          content_block: { type: 'tool_use', id: toolUseId(answer), name: call.name, input: {} },
        }),
        event('ping', {}),
        ...['', ...call.argumentPieces].map((piece) =>
          event('content_block_delta', { index: 0, delta: { type: 'input_json_delta', partial_json: piece } }),
        ),
      ]
    : [
        event('content_block_start', { index: 0, content_block: { type: 'text', text: '' } }),
        event('ping', {}),
        ...answer.pieces.map((piece) =>
          event('content_block_delta', { index: 0, delta: { type: 'text_delta', text: piece } }),
        ),
      ];
  return [
    withUsage(event('message_start', { message: message(answer, options, [], null, 1) }), 1),
    ...block,
    event('content_block_stop', { index: 0 }),
    // Two message_delta events, both with cumulative totals: a consumer that adds them counts the output twice.
    withUsage(
      event('message_delta', { delta: { stop_reason: null, stop_sequence: null }, ...usage({ output_tokens: half }) }),
      half,
    ),
    withUsage(
      event('message_delta', {
        delta: { stop_reason: call ? 'tool_use' : 'end_turn', stop_sequence: null },
        ...usage({ ...inputParts(answer), output_tokens: answer.outputTokens }),
      }),
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
  return {
    type: 'error',
    error: { type: types[status] ?? (status >= 500 ? 'api_error' : 'invalid_request_error'), message },
    request_id: requestId,
  };
}

/** Anthropic Messages, `POST /v1/messages` (and the error shape of `count_tokens`). */
export const messagesFormat: WireFormat = { requestIdHeader: 'request-id', intent, json, events, error };
