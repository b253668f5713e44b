import { expect } from 'chai';
import { WIRE_FORMATS } from '../../../src/core/formats/index.ts';
import type { WireFormat } from '../../../src/plugins/plugin-contract.ts';
import {
  namedSession,
  PREFIX_HASH_BUDGET,
  prefixSession,
  requestSession,
  sessionWithSource,
  STRING_SAMPLE,
} from '../../../src/data-plane/upstream/session-affinity.ts';

const prefixOf = (format: WireFormat) => WIRE_FORMATS[format].stablePrefix;
const session = (format: WireFormat, body: Record<string, unknown>, headers: Record<string, string> = {}) =>
  requestSession(headers, body, prefixOf(format));

const SYSTEM = { role: 'system', content: 'You are a careful assistant.' };
const chat = (...messages: unknown[]) => ({ model: 'm', messages });

describe('session affinity: the routing session of a request', () => {
  it('takes x-session-id first, then prompt_cache_key, then the stable prefix', () => {
    const body = { ...chat(SYSTEM, { role: 'user', content: 'hi' }), prompt_cache_key: 'cache-7' };
    expect(sessionWithSource({ 'x-session-id': 'chat-42' }, body, prefixOf('chat-completions'))).to.deep.equal({
      session: namedSession('chat-42'),
      source: 'header',
    });
    expect(sessionWithSource({}, body, prefixOf('chat-completions'))).to.deep.equal({
      session: namedSession('cache-7'),
      source: 'prompt_cache_key',
    });
    const { prompt_cache_key: _, ...plain } = body;
    expect(sessionWithSource({}, plain, prefixOf('chat-completions'))?.source).to.equal('prefix');
  });

  it('reads the same name as the same session in the header or in prompt_cache_key, and ignores an empty or blank header', () => {
    const body = chat({ role: 'user', content: 'hi' });
    expect(session('chat-completions', body, { 'x-session-id': 'conv-1' })).to.deep.equal(
      session('chat-completions', { ...body, prompt_cache_key: 'conv-1' }),
    );
    expect(session('chat-completions', body, { 'x-session-id': 'conv-1' })).not.to.deep.equal(
      session('chat-completions', body, { 'x-session-id': 'conv-2' }),
    );
    expect(session('chat-completions', body, { 'x-session-id': '  ' })).to.deep.equal(
      session('chat-completions', body),
    );
    expect(session('chat-completions', { ...body, prompt_cache_key: '' })).to.deep.equal(
      session('chat-completions', body),
    );
    expect(session('chat-completions', { ...body, prompt_cache_key: 7 })).to.deep.equal(
      session('chat-completions', body),
    );
  });

  it('Chat Completions: the leading system and developer messages and the first other message; later turns do not change it', () => {
    const developer = { role: 'developer', content: 'Answer briefly.' };
    const first = { role: 'user', content: 'What is a prefix cache?' };
    const turn1 = session('chat-completions', chat(SYSTEM, developer, first));
    const turn3 = session(
      'chat-completions',
      chat(
        SYSTEM,
        developer,
        first,
        { role: 'assistant', content: 'A cache of…' },
        { role: 'user', content: 'And then?' },
      ),
    );
    expect(turn3).to.deep.equal(turn1);
    expect(
      WIRE_FORMATS['chat-completions'].stablePrefix(
        chat(SYSTEM, developer, first, { role: 'assistant', content: 'x' }),
      ),
    ).to.deep.equal([SYSTEM, developer, first]);
    expect(
      session('chat-completions', chat({ ...SYSTEM, content: 'Another system prompt.' }, developer, first)),
    ).not.to.deep.equal(turn1);
    expect(
      session('chat-completions', chat(SYSTEM, developer, { role: 'user', content: 'Another question' })),
    ).not.to.deep.equal(turn1);
    expect(session('chat-completions', { model: 'm' })).to.equal(undefined);
    expect(session('chat-completions', chat())).to.equal(undefined);
  });

  it('Messages and count_tokens: system and messages[0]', () => {
    const body = {
      model: 'm',
      max_tokens: 10,
      system: [{ type: 'text', text: 'Long instructions', cache_control: { type: 'ephemeral' } }],
      messages: [{ role: 'user', content: 'First' }],
    };
    expect(WIRE_FORMATS.messages.stablePrefix(body)).to.deep.equal([body.system, body.messages[0]]);
    const later = {
      ...body,
      messages: [...body.messages, { role: 'assistant', content: 'Reply' }, { role: 'user', content: 'Second' }],
    };
    expect(session('messages', later)).to.deep.equal(session('messages', body));
    expect(session('count-tokens', body)).to.deep.equal(session('messages', body));
    expect(WIRE_FORMATS.messages.stablePrefix({ messages: [{ role: 'user', content: 'no system' }] })).to.deep.equal([
      { role: 'user', content: 'no system' },
    ]);
  });

  it('Responses: instructions and the first input item, or the input string', () => {
    expect(WIRE_FORMATS.responses.stablePrefix({ instructions: 'Be terse.', input: 'Hello' })).to.deep.equal([
      'Be terse.',
      'Hello',
    ]);
    const items = [
      { role: 'user', content: 'Hello' },
      { type: 'function_call_output', call_id: 'c1', output: '42' },
    ];
    expect(WIRE_FORMATS.responses.stablePrefix({ instructions: 'Be terse.', input: items })).to.deep.equal([
      'Be terse.',
      items[0],
    ]);
    expect(session('responses', { input: items })).to.deep.equal(session('responses', { input: items.slice(0, 1) }));
    expect(session('responses', { model: 'm' })).to.equal(undefined);
  });

  it('tells values apart by type and structure, not only by their text', () => {
    const distinct = [
      ['1'],
      [1],
      [true],
      ['true'],
      [null],
      ['null'],
      [['a', 'b']],
      [['ab']],
      ['a', 'b'],
      [{ a: 'b' }],
      [{ ab: '' }],
      [[]],
      [{}],
    ];
    const sessions = distinct.map((parts) => JSON.stringify(prefixSession(parts)));
    expect(new Set(sessions).size).to.equal(distinct.length);
  });

  it('tells conversations apart by their first message however long the system prompt they share', () => {
    const system = { role: 'system', content: 'Policy. '.repeat(20_000) };
    const one = session('chat-completions', chat(system, { role: 'user', content: 'Question one' }));
    expect(one).not.to.deep.equal(session('chat-completions', chat(system, { role: 'user', content: 'Question two' })));
    expect(one).to.deep.equal(
      session(
        'chat-completions',
        chat(system, { role: 'user', content: 'Question one' }, { role: 'assistant', content: 'Answer' }),
      ),
    );
  });

  it('hashes a long string by its length and ends, a prefix by at most its budget, and does not recurse without bound', () => {
    const long = (middle: string) => 'h'.repeat(STRING_SAMPLE) + middle + 't'.repeat(STRING_SAMPLE);
    expect(prefixSession([long('a middle')])).to.deep.equal(prefixSession([long('b middle')]));
    expect(prefixSession([long('a middle')])).not.to.deep.equal(prefixSession([long('a longer middle')]));
    expect(prefixSession(['x' + long('m')])).not.to.deep.equal(prefixSession(['y' + long('m')]));
    const many = Array.from({ length: (2 * PREFIX_HASH_BUDGET) / (2 * STRING_SAMPLE) }, () => long('m'));
    expect(prefixSession([...many, 'one'])).to.deep.equal(prefixSession([...many, 'two']));
    let deep: unknown = 'bottom';
    for (let level = 0; level < 100_000; level += 1) deep = [deep];
    expect(prefixSession([deep])).to.have.keys('hi', 'lo');
  });

  it('gives 64 bits as two unsigned 32-bit halves', () => {
    const { hi, lo } = namedSession('abc');
    for (const half of [hi, lo]) expect(Number.isInteger(half) && half >= 0 && half < 2 ** 32).to.equal(true);
  });
});
