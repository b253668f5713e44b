import { expect } from 'chai';
import { readFileSync } from 'node:fs';
import { dropEmptyFunctionCall } from '../../providers/epsilon/stream-fixups.ts';
import { SseSplitter, relaySse, FixupChain } from '../../src/data-plane/sse/sse-relay.ts';
import { PassThrough } from 'node:stream';
import type { ServerResponse } from 'node:http';

const fixture = (name: string) =>
  readFileSync(new URL(`../../providers/epsilon/__fixtures__/${name}`, import.meta.url), 'utf8')
    .trimEnd()
    .split('\n');

/** Runs a recorded stream through the relay with the fixup, in chunks of `size` bytes. */
async function relay(stream: string, size: number): Promise<string> {
  const bytes = Buffer.from(stream);
  async function* chunks() {
    for (let index = 0; index < bytes.length; index += size) yield bytes.subarray(index, index + size);
  }
  const out = new PassThrough();
  const received: Buffer[] = [];
  out.on('data', (chunk: Buffer) => received.push(chunk));
  await relaySse(chunks(), out as unknown as ServerResponse, {
    fixups: new FixupChain([
      { name: 'drop-empty-function-call', route: 'chat-completions', models: [], fixup: dropEmptyFunctionCall },
    ]),
    onEvent: () => {},
  });
  return Buffer.concat(received).toString();
}

describe('epsilon: dropEmptyFunctionCall', () => {
  it('turns the recorded stream into the expected one, event by event', () => {
    const outputs = fixture('empty-function-call.chunks.txt').map(
      (data) => dropEmptyFunctionCall({ data })?.data ?? data,
    );
    expect(outputs).to.deep.equal(fixture('empty-function-call.expected.txt'));
  });

  it('changes only the placeholder event, and gives the same bytes however the stream is split (CRLF too)', async () => {
    for (const newline of ['\n', '\r\n']) {
      const toStream = (lines: string[]) => lines.map((data) => `data: ${data}${newline}${newline}`).join('');
      const expected = toStream(fixture('empty-function-call.expected.txt'));
      for (const size of [1, 7, 64, 100_000]) {
        expect(await relay(toStream(fixture('empty-function-call.chunks.txt')), size)).to.equal(expected);
      }
    }
  });

  it('keeps a multi-line data event intact apart from the placeholder', async () => {
    const stream =
      'data: {"choices":[{"delta":\ndata: {"function_call":{"name":"","arguments":""},"content":"x"}}]}\n\n';
    expect(await relay(stream, 5)).to.equal('data: {"choices":[{"delta":{"content":"x"}}]}\n\n');
  });

  const unchanged: [string, string][] = [
    ['a partial call with a name', '{"choices":[{"delta":{"function_call":{"name":"lookup","arguments":""}}}]}'],
    ['a call with only the name empty', '{"choices":[{"delta":{"function_call":{"name":"","arguments":"{}"}}}]}'],
    ['a null function_call', '{"choices":[{"delta":{"function_call":null}}]}'],
    ['tool_calls', '{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"name":"","arguments":""}}]}}]}'],
    ['the end marker', '[DONE]'],
    ['data that is not JSON', 'function_call: not json'],
    ['JSON that is not a chunk', '"function_call"'],
    ['choices that are not a list', '{"choices":{"delta":{"function_call":{"name":"","arguments":""}}}}'],
    [
      'a placeholder outside a delta',
      '{"function_call":{"name":"","arguments":""},"choices":[{"message":{"function_call":{"name":"","arguments":""}}}]}',
    ],
  ];
  for (const [name, data] of unchanged) {
    it(`leaves ${name} untouched`, () => {
      expect(dropEmptyFunctionCall({ data })).to.equal(undefined);
    });
  }

  it('cleans every choice that carries the placeholder', () => {
    const data =
      '{"choices":[{"index":0,"delta":{"function_call":{"name":"","arguments":""}}},{"index":1,"delta":{"function_call":{"name":"f","arguments":""}}},{"index":2,"delta":{"function_call":{"name":"","arguments":""},"content":"b"}}]}';
    expect(JSON.parse(dropEmptyFunctionCall({ data })!.data)).to.deep.equal({
      choices: [
        { index: 0, delta: {} },
        { index: 1, delta: { function_call: { name: 'f', arguments: '' } } },
        { index: 2, delta: { content: 'b' } },
      ],
    });
  });

  it('keeps the event name and id of a rewritten event', () => {
    const data = '{"choices":[{"delta":{"function_call":{"name":"","arguments":""}}}]}';
    expect(dropEmptyFunctionCall({ event: 'chunk', id: '7', data })).to.deep.equal({
      event: 'chunk',
      id: '7',
      data: '{"choices":[{"delta":{}}]}',
    });
  });

  it('is parsed by the splitter the same way as the fixture lines', () => {
    const splitter = new SseSplitter();
    const blocks = splitter.push(
      Buffer.from(
        fixture('empty-function-call.chunks.txt')
          .map((data) => `data: ${data}\r\n\r\n`)
          .join(''),
      ),
    );
    expect(blocks.map((block) => block.event!.data)).to.deep.equal(fixture('empty-function-call.chunks.txt'));
  });
});
