import { expect } from 'chai';
import fc from 'fast-check';
import { JSON_BODY_LIMITS, scanObject } from '../../../src/data-plane/http/json-body.ts';
import { readClientMessage } from '../../../src/data-plane/websocket/client-messages.ts';

const bytes = (text: string) => Buffer.from(text, 'utf8');

function keysOf(text: string): string[] {
  const scan = scanObject(bytes(text), 0, JSON_BODY_LIMITS);
  if (scan.kind !== 'object') throw new Error(`not an object: ${text}`);
  return scan.members.map((member) => member.key);
}

function body(text: string): string {
  const message = readClientMessage(bytes(text));
  if (message.type !== 'response.create') throw new Error(`not a create: ${JSON.stringify(message)}`);
  return message.body.toString('utf8');
}

function refusal(text: string) {
  const message = readClientMessage(bytes(text));
  if (message.type !== 'invalid') throw new Error(`not refused: ${JSON.stringify(message)}`);
  const { status, code, param, detail } = message.error;
  return { status, code, param, detail };
}

describe('a Responses WebSocket message', () => {
  it('is a create body: "stream":true first, then every member but the transport\'s, each exactly as sent', () => {
    expect(body('{"type":"response.create","model":"m"}')).to.equal('{"stream":true,"model":"m"}');
    const transport = '"type": "response.create", "stream": false, "background":true';
    const spaced = `{ "model" : "m",\n  ${transport} , "n": 1.50e3, "x": "\\u00e9" }`;
    expect(body(spaced)).to.equal('{"stream":true, "model" : "m" , "n": 1.50e3, "x": "\\u00e9"}');
    expect(body('  {"type":"response.create"}  ')).to.equal('{"stream":true}');
    // A key spelled with escapes is the same key.
    const input = '"input":[{"role":"user","content":"a"}]';
    expect(body(`{"typ\\u0065":"response.create","generate":true,${input}}`)).to.equal(`{"stream":true,${input}}`);
  });

  it('keeps every other member as sent, whatever the object (property)', () => {
    const dropped = ['type', 'stream', 'background', 'generate'];
    const key = fc.string({ maxLength: 8 }).filter((name) => !dropped.includes(name));
    const objects = fc.dictionary(key, fc.jsonValue({ maxDepth: 3 }));
    fc.assert(
      fc.property(objects, fc.nat(), fc.constantFrom(0, 2), (members, at, indent) => {
        const entries = Object.entries(members);
        entries.splice(at % (entries.length + 1), 0, ['type', 'response.create']);
        const text = JSON.stringify(Object.fromEntries(entries), null, indent);
        const sent = body(text);
        // As the message's JSON reads (a -0 in `members` is written 0).
        const { type: _type, ...rest } = JSON.parse(text) as Record<string, unknown>;
        expect(JSON.parse(sent)).to.deep.equal({ stream: true, ...rest });
        // In the order sent (object keys that look like integers would reorder in a parsed object: the bytes tell).
        expect(keysOf(sent)).to.deep.equal(['stream', ...keysOf(text).filter((name) => name !== 'type')]);
      }),
      { numRuns: 300 },
    );
  });

  it('is a cancel, of the response named when one is', () => {
    const read = (text: string) => readClientMessage(bytes(text));
    expect(read('{"type":"response.cancel"}')).to.deep.equal({ type: 'response.cancel', responseId: undefined });
    const named = read('{"type":"response.cancel","response_id":"resp_1"}');
    expect(named).to.deep.equal({ type: 'response.cancel', responseId: 'resp_1' });
    expect(refusal('{"type":"response.cancel","response_id":7}')).to.include({ status: 400, param: 'response_id' });
  });

  it('is refused, with the reason, when it is not one the socket takes', () => {
    expect(refusal('not json')).to.include({ status: 400, code: 'GW_ERR_INVALID_JSON' });
    expect(refusal('[1,2]')).to.include({ status: 400, code: 'GW_ERR_INVALID_JSON' });
    expect(refusal('{"model":"m"}')).to.deep.include({ status: 400, code: 'GW_ERR_BAD_REQUEST', param: 'type' });
    expect(refusal('{"type":"response.create","type":"response.create"}').detail).to.include('more than once');
    expect(refusal('{"type":"session.update"}').detail).to.include("'session.update' is not one this socket takes");
    expect(refusal('{"type":7}').detail).to.include('must be a string');
    expect(refusal('{"type":"response.create","generate":false}')).to.include({ status: 400, param: 'generate' });
    const deep = `${'['.repeat(300)}${']'.repeat(300)}`;
    expect(refusal(`{"type":"response.create","input":${deep}}`).detail).to.include('nested deeper');
  });
});
