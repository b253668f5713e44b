import { expect } from 'chai';
import { readFileSync } from 'node:fs';
import { SseSplitter } from '../../src/data-plane/sse/sse-relay.ts';
import { WIRE_FORMATS } from '../../src/core/formats/index.ts';
import type { SseEvent, WireFormat } from '../../src/plugins/plugin-contract.ts';

const isTerminalEvent = (format: WireFormat, event: SseEvent) => WIRE_FORMATS[format].isTerminalEvent(event);

const eventsOf = (name: string) =>
  new SseSplitter()
    .push(readFileSync(new URL(`./__fixtures__/${name}`, import.meta.url)))
    .flatMap((block) => (block.event ? [block.event] : []));
const ends = (format: WireFormat, name: string) => eventsOf(name).some((event) => isTerminalEvent(format, event));

describe('isTerminalEvent', () => {
  it('finds the terminal event of each format in complete streams', () => {
    expect(ends('chat-completions', 'chat-completions.include-usage.sse')).to.equal(true);
    expect(ends('chat-completions', 'chat-completions.no-usage.sse')).to.equal(true);
    expect(ends('messages', 'messages.stream.sse')).to.equal(true);
    expect(ends('responses', 'responses.stream.sse')).to.equal(true);
    expect(ends('responses', 'responses.incomplete.sse')).to.equal(true);
    expect(ends('responses', 'responses.failed.data-only.sse')).to.equal(true);
  });

  it('finds none in a stream the upstream cut', () => {
    expect(ends('messages', 'messages.cut-short.sse')).to.equal(false);
    expect(
      isTerminalEvent('chat-completions', { data: '{"choices":[{"delta":{"content":"hi"},"finish_reason":null}]}' }),
    ).to.equal(false);
    expect(
      isTerminalEvent('chat-completions', { data: '{"choices":[{"delta":{},"finish_reason": "stop"}]}' }),
    ).to.equal(true);
    expect(
      isTerminalEvent('responses', {
        event: 'response.output_text.delta',
        data: '{"type":"response.output_text.delta","delta":"response.completed"}',
      }),
    ).to.equal(false);
    expect(isTerminalEvent('count-tokens', { data: '[DONE]' })).to.equal(false);
  });
});
