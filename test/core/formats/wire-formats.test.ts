import { expect } from 'chai';
import { errorFamilyOf, routePath } from '../../../src/core/route-table.ts';
import { WIRE_FORMATS } from '../../../src/core/formats/index.ts';
import type { WireFormat } from '../../../src/plugins/plugin-contract.ts';

describe('WIRE_FORMATS', () => {
  const formats = Object.keys(WIRE_FORMATS) as WireFormat[];

  it('holds one rules object per wire format, each naming its own format', () => {
    expect(formats).to.deep.equal(['chat-completions', 'responses', 'messages', 'count-tokens']);
    for (const format of formats) expect(WIRE_FORMATS[format].format).to.equal(format);
  });

  it('gives each format the error envelope its client route answers with', () => {
    for (const format of formats)
      expect(errorFamilyOf(routePath(format)), format).to.equal(WIRE_FORMATS[format].errorEnvelope);
  });

  it('has rules that read no `this`, so they can be passed on unbound', () => {
    const { isTerminalEvent, isErrorEvent, judgeEarlyEvent, textOf } = WIRE_FORMATS.messages;
    expect(isTerminalEvent({ event: 'message_stop', data: '{}' })).to.equal(true);
    expect(isErrorEvent({ event: 'error', data: '{}' })).to.equal(true);
    expect(judgeEarlyEvent({ event: 'ping', data: '{}' })).to.equal('opening');
    expect(textOf('{"type":"content_block_delta","delta":{"text":"Hi"}}')).to.equal('Hi');
  });
});
