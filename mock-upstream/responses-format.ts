import { openAiError } from './chat-completions-format.ts';
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
  type WireFormat,
} from './mock-answer.ts';

/**
 * Function tools (built-in tools such as web search run upstream), `tool_choice`, a last `function_call_output` item,
 * `text.format`.
 */
function intent(body: Record<string, unknown>): RequestIntent {
  const tools = (Array.isArray(body.tools) ? body.tools : [])
    .filter((tool) => isObject(tool) && tool.type === 'function' && typeof tool.name === 'string')
    .map((tool) => ({ name: tool.name as string, parameters: tool.parameters }));
  const choice = body.tool_choice;
  const last = Array.isArray(body.input) ? body.input.at(-1) : undefined;
  const format = isObject(body.text) ? body.text.format : undefined;
  return chooseIntent({
    tools,
    choice: (choice === 'none' || choice === 'required'
      ? choice
      : isObject(choice) && choice.type === 'function' && typeof choice.name === 'string'
        ? { name: choice.name }
        : 'auto') as IntentFields['choice'],
    ...(isObject(last) && last.type === 'function_call_output' ? { toolResult: resultText(last.output) } : {}),
    ...(isObject(format) && format.type === 'json_schema' ? { schema: format.schema ?? {} } : {}),
    ...(isObject(format) && format.type === 'json_object' ? { schema: {} } : {}),
  });
}

/** The `function_call` output item of a tool-call answer. */
function functionCall(answer: MockAnswer, status: 'in_progress' | 'completed') {
  const call = answer.toolCall!;
  return {
    type: 'function_call',
    id: `fc_${answer.id}`,
    call_id: `call_${call.callId}`,
    name: call.name,
    arguments: status === 'completed' ? call.arguments : '',
    status,
  };
}

function usage(answer: MockAnswer) {
  return {
    input_tokens: answer.inputTokens,
    input_tokens_details: { cached_tokens: answer.cachedTokens },
    output_tokens: answer.outputTokens,
    output_tokens_details: { reasoning_tokens: 0 },
    total_tokens: answer.inputTokens + answer.outputTokens,
  };
}

const text = (answer: MockAnswer) => answer.pieces.join('');
const itemId = (answer: MockAnswer) => `msg_${answer.id}`;

function message(answer: MockAnswer) {
  return {
    type: 'message',
    id: itemId(answer),
    status: 'completed',
    role: 'assistant',
    content: [{ type: 'output_text', text: text(answer), annotations: [] }],
  };
}

/** The response object; `usage` undefined leaves the field out. */
function response(answer: MockAnswer, status: string, output: unknown[], responseUsage: unknown) {
  return {
    id: `resp_${answer.id}`,
    object: 'response',
    created_at: nowSeconds(),
    status,
    error: null,
    incomplete_details: null,
    model: answer.model,
    output,
    ...(responseUsage === undefined ? {} : { usage: responseUsage }),
  };
}

function json(answer: MockAnswer, options: AnswerOptions): unknown {
  return response(
    answer,
    'completed',
    [answer.toolCall ? functionCall(answer, 'completed') : message(answer)],
    options.withUsage ? usage(answer) : undefined,
  );
}

function events(answer: MockAnswer, options: AnswerOptions): MockEvent[] {
  let sequence = 0;
  const event = (type: string, fields: Record<string, unknown>): MockEvent => ({
    event: type,
    data: { type, sequence_number: sequence++, ...fields },
  });
  const at = { item_id: itemId(answer), output_index: 0, content_index: 0 };
  const started = response(answer, 'in_progress', [], null);
  const opening = [
    event('response.created', { response: started }),
    event('response.in_progress', { response: started }),
  ];
  const completed = () => event('response.completed', { response: json(answer, options) });
  if (answer.toolCall) {
    const call = { item_id: `fc_${answer.id}`, output_index: 0 };
    const events = [
      ...opening,
      event('response.output_item.added', { output_index: 0, item: functionCall(answer, 'in_progress') }),
      ...answer.toolCall.argumentPieces.map((piece) =>
        event('response.function_call_arguments.delta', { ...call, delta: piece }),
      ),
      event('response.function_call_arguments.done', {
        ...call,
        name: answer.toolCall.name,
        arguments: answer.toolCall.arguments,
      }),
      event('response.output_item.done', { output_index: 0, item: functionCall(answer, 'completed') }),
    ];
    const done = completed();
    return [...events, options.withUsage ? { ...done, usage: usageOf(answer) } : done];
  }
  const events = [
    ...opening,
    event('response.output_item.added', {
      output_index: 0,
      item: { ...message(answer), status: 'in_progress', content: [] },
    }),
    event('response.content_part.added', { ...at, part: { type: 'output_text', text: '', annotations: [] } }),
    ...answer.pieces.map((piece) => event('response.output_text.delta', { ...at, delta: piece, logprobs: [] })),
    event('response.output_text.done', { ...at, text: text(answer), logprobs: [] }),
    event('response.content_part.done', { ...at, part: { type: 'output_text', text: text(answer), annotations: [] } }),
    event('response.output_item.done', { output_index: 0, item: message(answer) }),
  ];
  // Usage only in the terminal event; no [DONE] after it.
  const done = completed();
  return [...events, options.withUsage ? { ...done, usage: usageOf(answer) } : done];
}

/** OpenAI Responses, `POST /v1/responses`. */
export const responsesFormat: WireFormat = {
  requestIdHeader: 'x-request-id',
  intent,
  json,
  events,
  error: openAiError,
};
