import {
  chooseIntent,
  isObject,
  nowSeconds,
  resultText,
  usageOf,
  type AnswerOptions,
  type IntentFields,
  type MockAnswer,
  type MockEvent,
  type RequestIntent,
  type ReportedUsage,
  type WireFormat,
} from './mock-answer.ts';

/**
 * The search-grounding tool of gamma-style upstreams: a function tool with this reserved name that the
 * upstream runs itself, so a model never answers a call to it.
 */
const SEARCH_GROUNDING_TOOL = 'googleSearch';

/**
 * Tools (`type: function`) and `tool_choice`, or else the legacy `functions` and `function_call`; a last
 * `tool` (or legacy `function`) message; `response_format`.
 */
function intent(body: Record<string, unknown>): RequestIntent {
  let tools = (Array.isArray(body.tools) ? body.tools : [])
    .filter(
      (tool) =>
        isObject(tool) &&
        tool.type === 'function' &&
        isObject(tool.function) &&
        typeof tool.function.name === 'string' &&
        tool.function.name !== SEARCH_GROUNDING_TOOL,
    )
    .map((tool) => ({ name: tool.function.name as string, parameters: tool.function.parameters }));
  let choice = body.tool_choice;
  if (tools.length === 0 && Array.isArray(body.functions)) {
    tools = body.functions
      .filter((entry) => isObject(entry) && typeof entry.name === 'string')
      .map((entry) => ({ name: entry.name as string, parameters: entry.parameters, legacy: true }));
    choice = isObject(body.function_call) ? { function: body.function_call } : body.function_call;
  }
  const last = Array.isArray(body.messages) ? body.messages.at(-1) : undefined;
  const format = body.response_format;
  return chooseIntent({
    tools,
    choice: (choice === 'none' || choice === 'required'
      ? choice
      : isObject(choice) && isObject(choice.function) && typeof choice.function.name === 'string'
        ? { name: choice.function.name }
        : 'auto') as IntentFields['choice'],
    ...(isObject(last) && (last.role === 'tool' || last.role === 'function')
      ? { toolResult: resultText(last.content) }
      : {}),
    ...(isObject(format) && format.type === 'json_schema'
      ? { schema: isObject(format.json_schema) ? (format.json_schema.schema ?? {}) : {} }
      : {}),
    ...(isObject(format) && format.type === 'json_object' ? { schema: {} } : {}),
  });
}

const callId = (answer: MockAnswer) => `call_${answer.toolCall!.callId}`;

/** Thinking tokens the `running-usage` profile counts in `total_tokens` only, as the gamma-style upstream does. */
const THINKING_TOKENS = 40;

function usage(answer: MockAnswer, completionTokens: number, totalTokens = answer.inputTokens + completionTokens) {
  return {
    prompt_tokens: answer.inputTokens,
    completion_tokens: completionTokens,
    total_tokens: totalTokens,
    prompt_tokens_details: { cached_tokens: answer.cachedTokens, audio_tokens: 0 },
    completion_tokens_details: { reasoning_tokens: 0, audio_tokens: 0 },
  };
}

function message(answer: MockAnswer) {
  const call = answer.toolCall;
  const base = { role: 'assistant', content: call ? null : answer.pieces.join(''), refusal: null, annotations: [] };
  if (call?.legacy) return { ...base, function_call: { name: call.name, arguments: call.arguments } };
  if (call)
    return {
      ...base,
      tool_calls: [{ id: callId(answer), type: 'function', function: { name: call.name, arguments: call.arguments } }],
    };
  return base;
}

const finishReason = (answer: MockAnswer) =>
  answer.toolCall?.legacy ? 'function_call' : answer.toolCall ? 'tool_calls' : 'stop';

function json(answer: MockAnswer, options: AnswerOptions): unknown {
  return {
    id: `chatcmpl-${answer.id}`,
    object: 'chat.completion',
    created: nowSeconds(),
    model: answer.model,
    choices: [{ index: 0, message: message(answer), logprobs: null, finish_reason: finishReason(answer) }],
    ...(options.withUsage ? { usage: usage(answer, answer.outputTokens) } : {}),
    service_tier: 'default',
    system_fingerprint: 'fp_mock',
  };
}

function events(answer: MockAnswer, options: AnswerOptions): MockEvent[] {
  const base = {
    id: `chatcmpl-${answer.id}`,
    object: 'chat.completion.chunk',
    created: nowSeconds(),
    model: answer.model,
    system_fingerprint: 'fp_mock',
  };
  const chunk = (delta: Record<string, unknown>, finish: string | null = null, index = 0): MockEvent => ({
    data: {
      ...base,
      choices: [{ index, delta, logprobs: null, finish_reason: finish }],
      ...(options.includeUsage ? { usage: null } : {}),
    },
  });
  const done: MockEvent = { data: '[DONE]' };
  const last = answer.pieces.length - 1;

  if (answer.toolCall) {
    // A tool call (or legacy function_call) streams as OpenAI's does, whatever the profile: the id and
    // name first, then the arguments in pieces.
    const { name, argumentPieces } = answer.toolCall;
    const events = answer.toolCall.legacy
      ? [
          chunk({ role: 'assistant', content: null, function_call: { name, arguments: '' }, refusal: null }),
          ...argumentPieces.map((piece) => chunk({ function_call: { arguments: piece } })),
          chunk({}, 'function_call'),
        ]
      : [
          chunk({
            role: 'assistant',
            content: null,
            tool_calls: [{ index: 0, id: callId(answer), type: 'function', function: { name, arguments: '' } }],
            refusal: null,
          }),
          ...argumentPieces.map((piece) => chunk({ tool_calls: [{ index: 0, function: { arguments: piece } }] })),
          chunk({}, 'tool_calls'),
        ];
    if (options.includeUsage && options.withUsage)
      events.push({
        data: { ...base, choices: [], usage: usage(answer, answer.outputTokens) },
        usage: usageOf(answer),
      });
    return [...events, done];
  }

  if (options.profile === 'running-usage') {
    // Every chunk carries running totals, include_usage or not; thinking tokens are only in the total.
    return [
      ...answer.pieces.map((piece, index): MockEvent => {
        const delta = index === 0 ? { role: 'assistant', content: piece } : { content: piece };
        const choices = [{ index: 0, delta, finish_reason: index === last ? 'stop' : null }];
        if (!options.withUsage) return { data: { ...base, choices } };
        const produced = Math.round(((index + 1) / answer.pieces.length) * answer.outputTokens);
        const running = usage(answer, produced, answer.inputTokens + produced + THINKING_TOKENS);
        const reported: ReportedUsage = { ...usageOf(answer), outputTokens: produced + THINKING_TOKENS };
        return { data: { ...base, choices, usage: running }, usage: reported };
      }),
      done,
    ];
  }

  const events: MockEvent[] = [chunk({ role: 'assistant', content: '', refusal: null })];
  if (options.profile === 'empty-function-call') {
    answer.pieces.forEach((piece) => events.push(chunk({ content: piece })));
    // A real tool call in fragments, matched by index.
    events.push(
      chunk({
        tool_calls: [{ index: 0, id: 'call_mock', type: 'function', function: { name: 'lookup', arguments: '' } }],
      }),
    );
    events.push(chunk({ tool_calls: [{ index: 0, function: { arguments: '{"q":"x"}' } }] }));
    // A real legacy function_call in fragments, on a second choice so it does not mask choice 0's tool call.
    events.push(chunk({ role: 'assistant', content: null, function_call: { name: 'lookup', arguments: '' } }, null, 1));
    events.push(chunk({ function_call: { arguments: '{"q":"y"}' } }, 'function_call', 1));
    // The placeholder a Go relay without omitempty sends on the final chunk.
    events.push(chunk({ content: '', function_call: { name: '', arguments: '' }, refusal: '' }, 'tool_calls'));
  } else {
    answer.pieces.forEach((piece, index) => events.push(chunk({ content: piece }, index === last ? 'stop' : null)));
  }
  if (options.includeUsage && options.withUsage) {
    events.push({ data: { ...base, choices: [], usage: usage(answer, answer.outputTokens) }, usage: usageOf(answer) });
  }
  events.push(done);
  return events;
}

/** The OpenAI error body (Chat Completions and Responses). */
export function openAiError(status: number, message: string): unknown {
  const [type, code] =
    status === 401
      ? ['invalid_request_error', 'invalid_api_key']
      : status === 404
        ? ['invalid_request_error', 'not_found']
        : status === 429
          ? ['requests', 'rate_limit_exceeded']
          : status >= 500
            ? ['server_error', null]
            : ['invalid_request_error', null];
  return { error: { message, type, param: null, code } };
}

/** OpenAI Chat Completions, `POST /v1/chat/completions`. */
export const chatCompletionsFormat: WireFormat = {
  requestIdHeader: 'x-request-id',
  intent,
  json,
  events,
  error: openAiError,
};
