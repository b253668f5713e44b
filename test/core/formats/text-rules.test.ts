import { expect } from 'chai';
import { WIRE_FORMATS } from '../../../src/core/formats/index.ts';
import { valueAt } from '../../../src/core/formats/format-reading.ts';

const texts = (slots: readonly { text: string }[]) => slots.map((slot) => slot.text);

describe('wire formats: where requests, answers and stream events keep their texts', () => {
  it('every slot leads to its text in the value it was read from', () => {
    const body = {
      messages: [
        { role: 'system', content: 'S' },
        {
          role: 'user',
          content: [
            { type: 'text', text: 'U1' },
            { type: 'image_url', image_url: { url: 'x' } },
          ],
        },
      ],
    };
    for (const slot of WIRE_FORMATS['chat-completions'].texts.request(body))
      expect(valueAt(body, slot.path)).to.equal(slot.text);
  });

  it("Chat Completions: every role's contents (the assistant's too); answers, deltas, tool-call arguments", () => {
    const rules = WIRE_FORMATS['chat-completions'].texts;
    const messages = [
      { role: 'developer', content: 'D' },
      { role: 'assistant', content: 'A' },
      { role: 'tool', tool_call_id: 't', content: 'T' },
      { role: 'user', content: [{ type: 'text', text: 'U' }] },
    ];
    expect(texts(rules.request({ messages }))).to.deep.equal(['D', 'A', 'T', 'U']);
    const answer = {
      choices: [
        {
          index: 0,
          message: {
            role: 'assistant',
            content: 'C',
            refusal: 'R',
            tool_calls: [{ index: 0, function: { name: 'f', arguments: '{"a":1}' } }],
          },
        },
      ],
    };
    expect(rules.answer(answer).map((slot) => [slot.path.join('.'), slot.text])).to.deep.equal([
      ['choices.0.message.content', 'C'],
      ['choices.0.message.refusal', 'R'],
      ['choices.0.message.tool_calls.0.function.arguments', '{"a":1}'],
    ]);
    const chunk = {
      choices: [
        {
          index: 1,
          delta: { content: 'x', tool_calls: [{ index: 2, function: { arguments: '{"b"' } }] },
          finish_reason: null,
        },
        { index: 0, delta: {}, finish_reason: 'stop' },
      ],
    };
    const event = rules.event(chunk);
    expect(event.deltas.map((slot) => [slot.channel, slot.text])).to.deep.equal([
      ['choice 1|content', 'x'],
      ['choice 1|tool 2', '{"b"'],
    ]);
    expect(event.closes).to.deep.equal(['choice 0']);
  });

  it('Messages: system and every turn with tool results; content blocks, JSON input deltas and block ends', () => {
    const rules = WIRE_FORMATS.messages.texts;
    const request = {
      system: 'S',
      messages: [
        {
          role: 'user',
          content: [
            { type: 'text', text: 'U' },
            { type: 'tool_result', tool_use_id: 't', content: [{ type: 'text', text: 'T' }] },
          ],
        },
        { role: 'assistant', content: 'A' },
      ],
    };
    expect(texts(rules.request(request))).to.deep.equal(['S', 'U', 'T', 'A']);
    expect(texts(WIRE_FORMATS['count-tokens'].texts.request(request))).to.deep.equal(['S', 'U', 'T', 'A']);
    // A tool call's input: every string and every member's name (a value before its name), as its JSON text is read.
    const input = { q: 'Q', n: 1, list: ['L'] };
    const content = [
      { type: 'text', text: 'C' },
      { type: 'tool_use', id: 'u', name: 'f', input },
    ];
    expect(texts(rules.answer({ content }))).to.deep.equal(['C', 'Q', 'q', 'n', 'L', 'list']);
    const delta = { type: 'input_json_delta', partial_json: '{"q":' };
    expect(rules.event({ type: 'content_block_delta', index: 3, delta }).deltas).to.deep.equal([
      { path: ['delta', 'partial_json'], text: '{"q":', channel: 'block 3|text', json: true },
    ]);
    expect(rules.event({ type: 'content_block_stop', index: 3 }).closes).to.deep.equal(['block 3']);
    expect(rules.event({ type: 'message_delta', delta: { stop_reason: 'end_turn' } }).deltas).to.deep.equal([]);
  });

  it('Responses: instructions, every input item, tool outputs; output items, deltas, whole texts as parts end', () => {
    const rules = WIRE_FORMATS.responses.texts;
    const request = {
      instructions: 'I',
      input: [
        { role: 'user', content: [{ type: 'input_text', text: 'U' }] },
        { type: 'message', role: 'assistant', content: [{ type: 'output_text', text: 'A' }] },
        { type: 'function_call_output', call_id: 'c', output: 'O' },
      ],
    };
    expect(texts(rules.request(request))).to.deep.equal(['I', 'U', 'A', 'O']);
    expect(texts(rules.request({ input: 'plain' }))).to.deep.equal(['plain']);
    const output = [
      { type: 'message', content: [{ type: 'output_text', text: 'T' }] },
      { type: 'function_call', name: 'f', arguments: '{}' },
      { type: 'reasoning', summary: [{ type: 'summary_text', text: 'R' }] },
    ];
    expect(texts(rules.answer({ output }))).to.deep.equal(['T', '{}', 'R']);
    expect(
      rules.event({
        type: 'response.output_text.delta',
        item_id: 'msg_1',
        output_index: 0,
        content_index: 0,
        delta: 'd',
      }).deltas,
    ).to.deep.equal([{ path: ['delta'], text: 'd', channel: 'response.output_text msg_1 0|text' }]);
    expect(rules.event({ type: 'response.audio.delta', delta: 'AAAA' }).deltas).to.deep.equal([]);
    const done = rules.event({
      type: 'response.output_text.done',
      item_id: 'msg_1',
      output_index: 0,
      content_index: 0,
      text: 'whole',
    });
    expect(done).to.deep.equal({
      deltas: [],
      wholes: [{ path: ['text'], text: 'whole' }],
      closes: ['response.output_text msg_1 0'],
    });
    expect(texts(rules.event({ type: 'response.completed', response: { output } }).wholes)).to.deep.equal([
      'T',
      '{}',
      'R',
    ]);
  });
});
