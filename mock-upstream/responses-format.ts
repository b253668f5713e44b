import { openAiError } from './chat-completions-format.ts';
import { nowSeconds, usageOf, type AnswerOptions, type MockAnswer, type MockEvent, type WireFormat } from './mock-answer.ts';

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
  return { type: 'message', id: itemId(answer), status: 'completed', role: 'assistant', content: [{ type: 'output_text', text: text(answer), annotations: [] }] };
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
  return response(answer, 'completed', [message(answer)], options.withUsage ? usage(answer) : undefined);
}

function events(answer: MockAnswer, options: AnswerOptions): MockEvent[] {
  let sequence = 0;
  const event = (type: string, fields: Record<string, unknown>): MockEvent => ({ event: type, data: { type, sequence_number: sequence++, ...fields } });
  const at = { item_id: itemId(answer), output_index: 0, content_index: 0 };
  const started = response(answer, 'in_progress', [], null);
  const events = [
    event('response.created', { response: started }),
    event('response.in_progress', { response: started }),
    event('response.output_item.added', { output_index: 0, item: { ...message(answer), status: 'in_progress', content: [] } }),
    event('response.content_part.added', { ...at, part: { type: 'output_text', text: '', annotations: [] } }),
    ...answer.pieces.map((piece) => event('response.output_text.delta', { ...at, delta: piece, logprobs: [] })),
    event('response.output_text.done', { ...at, text: text(answer), logprobs: [] }),
    event('response.content_part.done', { ...at, part: { type: 'output_text', text: text(answer), annotations: [] } }),
    event('response.output_item.done', { output_index: 0, item: message(answer) }),
  ];
  // Usage only in the terminal event; no [DONE] after it.
  const completed = event('response.completed', { response: json(answer, options) });
  return [...events, options.withUsage ? { ...completed, usage: usageOf(answer) } : completed];
}

/** OpenAI Responses, `POST /v1/responses`. */
export const responsesFormat: WireFormat = { requestIdHeader: 'x-request-id', json, events, error: openAiError };
