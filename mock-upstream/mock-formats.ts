/** What one mock answer is made of, whatever the wire format. */
export interface MockAnswer {
  readonly id: string;
  readonly model: string;
  readonly pieces: readonly string[];
  readonly inputTokens: number;
  readonly outputTokens: number;
  /** Tokens read from the cache (a part of `inputTokens`). */
  readonly cachedTokens: number;
}

/** One SSE event: an optional `event:` name and its JSON data (or a literal such as `[DONE]`). */
export interface MockEvent {
  readonly event?: string;
  readonly data: unknown;
}

export type Profile = 'standard' | 'running-usage' | 'empty-function-call';

const created = () => Math.floor(Date.now() / 1000);

// ---- Chat Completions ----

export function chatCompletionJson(answer: MockAnswer, withUsage: boolean): unknown {
  return {
    id: answer.id,
    object: 'chat.completion',
    created: created(),
    model: answer.model,
    choices: [{ index: 0, message: { role: 'assistant', content: answer.pieces.join(''), refusal: null }, logprobs: null, finish_reason: 'stop' }],
    ...(withUsage ? { usage: chatUsage(answer, answer.outputTokens) } : {}),
    system_fingerprint: 'fp_mock',
  };
}

function chatUsage(answer: MockAnswer, outputTokens: number, total = answer.inputTokens + outputTokens) {
  return {
    prompt_tokens: answer.inputTokens,
    completion_tokens: outputTokens,
    total_tokens: total,
    prompt_tokens_details: { cached_tokens: answer.cachedTokens, audio_tokens: 0 },
    completion_tokens_details: { reasoning_tokens: 0, audio_tokens: 0 },
  };
}

export function chatCompletionEvents(answer: MockAnswer, options: { includeUsage: boolean; withUsage: boolean; profile: Profile }): MockEvent[] {
  const base = { id: answer.id, object: 'chat.completion.chunk', created: created(), model: answer.model };
  const usageField = options.includeUsage ? { usage: null } : {};
  const chunk = (delta: Record<string, unknown>, finish: string | null = null, extra: Record<string, unknown> = usageField) => ({
    data: { ...base, choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }], ...extra },
  });
  const events: MockEvent[] = [];
  if (options.profile === 'running-usage') {
    // Running totals on every chunk, thinking tokens only in the total.
    const thinking = 40;
    answer.pieces.forEach((piece, index) => {
      const delta = index === 0 ? { role: 'assistant', content: piece } : { content: piece };
      const produced = Math.round(((index + 1) / answer.pieces.length) * answer.outputTokens);
      const last = index === answer.pieces.length - 1;
      const usage = options.withUsage ? { usage: chatUsage(answer, produced, answer.inputTokens + produced + thinking) } : {};
      events.push(chunk(delta, last ? 'stop' : null, usage));
    });
    events.push({ data: '[DONE]' });
    return events;
  }
  events.push(chunk({ role: 'assistant', content: '' }));
  for (const piece of answer.pieces) events.push(chunk({ content: piece }));
  if (options.profile === 'empty-function-call') {
    events.push(chunk({ tool_calls: [{ index: 0, id: 'call_mock', type: 'function', function: { name: 'lookup', arguments: '' } }] }));
    events.push(chunk({ tool_calls: [{ index: 0, function: { arguments: '{"q":"x"}' } }] }));
    events.push(chunk({ content: '', function_call: { name: '', arguments: '' }, refusal: '' }, 'tool_calls'));
  } else {
    events.push(chunk({}, 'stop'));
  }
  if (options.includeUsage && options.withUsage) events.push({ data: { ...base, choices: [], usage: chatUsage(answer, answer.outputTokens) } });
  events.push({ data: '[DONE]' });
  return events;
}

// ---- Responses ----

function responsesUsage(answer: MockAnswer) {
  return {
    input_tokens: answer.inputTokens,
    input_tokens_details: { cached_tokens: answer.cachedTokens },
    output_tokens: answer.outputTokens,
    output_tokens_details: { reasoning_tokens: 0 },
    total_tokens: answer.inputTokens + answer.outputTokens,
  };
}

export function responseJson(answer: MockAnswer, withUsage: boolean, status = 'completed'): Record<string, unknown> {
  return {
    id: answer.id,
    object: 'response',
    created_at: created(),
    status,
    error: null,
    incomplete_details: null,
    model: answer.model,
    output: [
      {
        type: 'message',
        id: `msg_${answer.id}`,
        status: 'completed',
        role: 'assistant',
        content: [{ type: 'output_text', text: answer.pieces.join(''), annotations: [] }],
      },
    ],
    usage: withUsage ? responsesUsage(answer) : null,
  };
}

export function responseEvents(answer: MockAnswer, withUsage: boolean): MockEvent[] {
  let sequence = 0;
  const event = (type: string, fields: Record<string, unknown>): MockEvent => ({ event: type, data: { type, sequence_number: sequence++, ...fields } });
  const itemId = `msg_${answer.id}`;
  const text = answer.pieces.join('');
  const inProgress = { ...responseJson(answer, false, 'in_progress'), output: [], usage: null };
  return [
    event('response.created', { response: inProgress }),
    event('response.in_progress', { response: inProgress }),
    event('response.output_item.added', { output_index: 0, item: { type: 'message', id: itemId, status: 'in_progress', role: 'assistant', content: [] } }),
    event('response.content_part.added', { item_id: itemId, output_index: 0, content_index: 0, part: { type: 'output_text', text: '', annotations: [] } }),
    ...answer.pieces.map((piece) => event('response.output_text.delta', { item_id: itemId, output_index: 0, content_index: 0, delta: piece })),
    event('response.output_text.done', { item_id: itemId, output_index: 0, content_index: 0, text }),
    event('response.content_part.done', { item_id: itemId, output_index: 0, content_index: 0, part: { type: 'output_text', text, annotations: [] } }),
    event('response.output_item.done', { output_index: 0, item: (responseJson(answer, false).output as unknown[])[0] }),
    event('response.completed', { response: responseJson(answer, withUsage) }),
  ];
}

// ---- Messages ----

/** Messages counts input parts separately: uncached input + cache writes + cache reads. */
function messagesUsage(answer: MockAnswer, outputTokens: number) {
  const cacheCreation = answer.cachedTokens > 0 ? 0 : Math.min(4, answer.inputTokens);
  return {
    input_tokens: answer.inputTokens - answer.cachedTokens - cacheCreation,
    cache_creation_input_tokens: cacheCreation,
    cache_read_input_tokens: answer.cachedTokens,
    output_tokens: outputTokens,
  };
}

export function messageJson(answer: MockAnswer, withUsage: boolean): unknown {
  return {
    id: answer.id,
    type: 'message',
    role: 'assistant',
    model: answer.model,
    content: [{ type: 'text', text: answer.pieces.join('') }],
    stop_reason: 'end_turn',
    stop_sequence: null,
    ...(withUsage ? { usage: messagesUsage(answer, answer.outputTokens) } : {}),
  };
}

export function messageEvents(answer: MockAnswer, withUsage: boolean): MockEvent[] {
  const event = (type: string, fields: Record<string, unknown>): MockEvent => ({ event: type, data: { type, ...fields } });
  const start = { ...(messageJson(answer, false) as Record<string, unknown>), content: [], stop_reason: null, usage: withUsage ? messagesUsage(answer, 1) : undefined };
  const half = Math.ceil(answer.outputTokens / 2);
  return [
    event('message_start', { message: start }),
    event('content_block_start', { index: 0, content_block: { type: 'text', text: '' } }),
    event('ping', {}),
    ...answer.pieces.map((piece) => event('content_block_delta', { index: 0, delta: { type: 'text_delta', text: piece } })),
    event('content_block_stop', { index: 0 }),
    // Two cumulative deltas: a consumer that sums them counts the output twice.
    ...(withUsage
      ? [
          event('message_delta', { delta: { stop_reason: null, stop_sequence: null }, usage: { output_tokens: half } }),
          event('message_delta', { delta: { stop_reason: 'end_turn', stop_sequence: null }, usage: { output_tokens: answer.outputTokens } }),
        ]
      : [event('message_delta', { delta: { stop_reason: 'end_turn', stop_sequence: null }, usage: {} })]),
    event('message_stop', {}),
  ];
}
