import { expect } from 'chai';
import { upstreamFailure, type GatewayError } from '../../../src/core/gateway-errors.ts';
import { WIRE_FORMATS } from '../../../src/core/formats/index.ts';
import type { WireFormat } from '../../../src/plugins/plugin-contract.ts';
import { SseSplitter } from '../../../src/data-plane/sse/sse-relay.ts';

const inBandError = (format: WireFormat, error: GatewayError) => WIRE_FORMATS[format].inBandError(error);

const parse = (bytes: Buffer) => {
  const [block, ...others] = new SseSplitter().push(bytes);
  expect(others).to.deep.equal([]);
  return { name: block!.event!.event, data: JSON.parse(block!.event!.data) as Record<string, any> };
};

describe('inBandError', () => {
  const error = upstreamFailure('acme', 'a streamed event was larger than 16777216 bytes');
  const message = "Upstream provider 'acme' failed: a streamed event was larger than 16777216 bytes";

  it('writes a Chat Completions error chunk: data with a top-level error object, no event name', () => {
    const event = parse(inBandError('chat-completions', error));
    expect(event.name).to.equal(undefined);
    expect(event.data).to.deep.equal({
      detail: message,
      error: { message, type: 'upstream_error', param: null, code: 'GW_ERR_UPSTREAM' },
    });
  });

  it('writes a Messages error event as Anthropic sends it mid-stream', () => {
    const event = parse(inBandError('messages', error));
    expect(event.name).to.equal('error');
    expect(event.data).to.deep.equal({ detail: message, type: 'error', error: { type: 'api_error', message } });
  });

  it('writes a Responses error event', () => {
    const event = parse(inBandError('responses', error));
    expect(event.name).to.equal('error');
    expect(event.data).to.deep.include({
      type: 'error',
      code: 'GW_ERR_UPSTREAM',
      message,
      param: null,
      detail: message,
    });
    expect(event.data.error).to.deep.equal({ message, type: 'upstream_error', param: null, code: 'GW_ERR_UPSTREAM' });
  });

  it('keeps a message with line breaks on one data line', () => {
    const bytes = inBandError('chat-completions', upstreamFailure('acme', 'line one\nline two'));
    expect(bytes.toString().split('\n').filter(Boolean)).to.have.length(1);
  });
});
