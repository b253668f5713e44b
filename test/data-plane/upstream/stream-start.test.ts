import { expect } from 'chai';
import type { SseEvent, WireFormat } from '../../../src/plugins/plugin-contract.ts';
import { WIRE_FORMATS } from '../../../src/core/formats/index.ts';
import type { Dispatcher } from 'undici';
import { awaitDispatchedStreamStart, UpstreamResponse } from '../../../src/data-plane/upstream/upstream-client.ts';

const judgeEarlyEvent = (format: WireFormat, event: SseEvent) => WIRE_FORMATS[format].judgeEarlyEvent(event);
const isOpeningEvent = (format: WireFormat, event: SseEvent) => judgeEarlyEvent(format, event) === 'opening';
const isErrorEvent = (format: WireFormat, event: SseEvent) => WIRE_FORMATS[format].isErrorEvent(event);

/** A dispatched response whose socket delivers `parts`, one per read, then ends (or breaks). */
function chunks(parts: string[], failAtEnd = false): UpstreamResponse {
  const response = new UpstreamResponse(undefined, undefined);
  const controller = { pause() {}, resume() {}, abort() {} } as unknown as Dispatcher.DispatchController;
  response.onRequestStart(controller);
  response.onResponseStart(controller, 200, {});
  const feed = (index: number) => {
    if (index < parts.length) {
      response.onResponseData(controller, Buffer.from(parts[index]!));
      setImmediate(feed, index + 1);
    } else if (failAtEnd) response.onResponseError(controller, new Error('socket hang up'));
    else response.onResponseEnd();
  };
  setImmediate(feed, 0);
  return response;
}

/** Everything a body hands on, to its end. */
function text(body: UpstreamResponse): Promise<string> {
  const parts: Buffer[] = [];
  return new Promise((resolve, reject) =>
    body.attach({
      data: (chunk) => parts.push(Buffer.from(chunk)),
      end: () => resolve(Buffer.concat(parts).toString()),
      error: reject,
    }),
  );
}

describe('stream start', () => {
  it('tells opening events from content per format', () => {
    const opening: [WireFormat, string | undefined, string, boolean][] = [
      [
        'chat-completions',
        undefined,
        '{"choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}',
        true,
      ],
      [
        'chat-completions',
        undefined,
        '{"choices":[{"index":0,"delta":{"role":"assistant","content":"Hi"},"finish_reason":null}]}',
        false,
      ],
      [
        'chat-completions',
        undefined,
        '{"choices":[{"index":0,"delta":{"tool_calls":[]},"finish_reason":null}]}',
        false,
      ],
      ['chat-completions', undefined, '{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}', false],
      ['chat-completions', undefined, '{"choices":[],"usage":{"prompt_tokens":1}}', false],
      ['chat-completions', undefined, '[DONE]', false],
      ['messages', 'message_start', '{"type":"message_start"}', true],
      ['messages', 'ping', '{"type":"ping"}', true],
      ['messages', 'content_block_start', '{"type":"content_block_start"}', false],
      ['responses', 'response.created', '{}', true],
      ['responses', 'response.in_progress', '{}', true],
      ['responses', 'response.output_item.added', '{}', false],
    ];
    for (const [format, event, data, expected] of opening)
      expect(isOpeningEvent(format, { event, data }), `${format} ${event} ${data}`).to.equal(expected);
    expect(isErrorEvent('messages', { event: 'error', data: '{}' })).to.equal(true);
    expect(isErrorEvent('responses', { event: 'response.failed', data: '{}' })).to.equal(true);
    expect(isErrorEvent('chat-completions', { data: '{"error":{"message":"x"}}' })).to.equal(true);
    expect(isErrorEvent('chat-completions', { data: '{"choices":[]}' })).to.equal(false);
  });

  it('calls an event whose data is not JSON malformed, never content, in every format', () => {
    const malformed: [WireFormat, string | undefined, string][] = [
      ['chat-completions', undefined, '{"choices":[{"index":0,"delta":{"content":"Hi there'],
      ['chat-completions', undefined, 'Hi there'],
      ['messages', 'content_block_delta', '{"type":"content_block_delta","delta":{"text":"Hi'],
      ['messages', undefined, 'not json'],
      ['responses', 'response.output_text.delta', '{"delta":"Hi'],
    ];
    for (const [format, event, data] of malformed)
      expect(judgeEarlyEvent(format, { event, data }), `${format} ${data}`).to.equal('malformed');
    expect(judgeEarlyEvent('chat-completions', { data: '[DONE]' })).to.equal('content');
    expect(judgeEarlyEvent('messages', { event: 'ping', data: '' })).to.equal('opening');
  });

  it('fails a stream whose first event after the openings is malformed, as broken, before a byte is handed on', async () => {
    const opening =
      'data: {"choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}\n\n';
    const start = await awaitDispatchedStreamStart(
      chunks([opening, 'data: {"choices":[{"index":0,"delta":{"content":"Hi\n\n']),
      'chat-completions',
      1 << 20,
    );
    expect(start.kind).to.equal('broken');
  });

  it('hands back every byte as it came once content arrives, however the events are cut', async () => {
    const stream =
      'event: message_start\ndata: {"type":"message_start"}\n\nevent: ping\ndata: {"type":"ping"}\n\nevent: content_block_delta\ndata: {"type":"content_block_delta"}\n\nevent: message_stop\ndata: {}\n\n';
    for (const size of [1, 7, 40, stream.length]) {
      const parts = [];
      for (let index = 0; index < stream.length; index += size) parts.push(stream.slice(index, index + size));
      const start = await awaitDispatchedStreamStart(chunks(parts), 'messages', 1 << 20);
      expect(start.kind).to.equal('content');
      if (start.kind === 'content') expect(await text(start.body)).to.equal(stream);
    }
  });

  it('reports an error event or a break before content, and releases at the end or past the held-bytes cap', async () => {
    const opening = 'event: response.created\ndata: {}\n\n';
    expect(
      (await awaitDispatchedStreamStart(chunks([opening, 'event: error\ndata: {}\n\n']), 'responses', 1 << 20)).kind,
    ).to.equal('error');
    expect((await awaitDispatchedStreamStart(chunks([opening], true), 'responses', 1 << 20)).kind).to.equal('broken');
    const ended = await awaitDispatchedStreamStart(chunks([opening]), 'responses', 1 << 20);
    expect(ended.kind).to.equal('content');
    if (ended.kind === 'content') expect(await text(ended.body)).to.equal(opening);
    const capped = await awaitDispatchedStreamStart(
      chunks([opening, opening, opening], true),
      'responses',
      opening.length,
    );
    expect(capped.kind).to.equal('content');
  });
});
