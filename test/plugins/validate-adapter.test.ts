import { expect } from 'chai';
import type { AdapterContext, ProviderPlugin, RouteAdapter, SseEvent } from '../../src/plugins/plugin-contract.ts';
import { isPluginFault, type PluginFault } from '../../src/plugins/plugin-fault.ts';
import { PluginLoadError, validatePlugin } from '../../src/plugins/validate-plugin.ts';

const USAGE = { fromBody: () => undefined, fromStreamEvent: () => undefined };

/** A plugin whose chat-completions route is adapted (as JavaScript could write it: no types). */
function adapted(adapter: Record<string, unknown>, route: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    contract: 1,
    vendor: 'acme',
    routes: {
      'chat-completions': {
        path: '/v2/generate',
        format: 'chat-completions',
        auth: { header: 'authorization', prefix: 'Token ' },
        adapter,
        ...route,
      },
    },
    models: [
      { id: 'one', listed: true, routes: ['chat-completions'], pricing: { input: 1, cachedInput: 1, output: 2 } },
    ],
  };
}

const WHOLE = {
  buildRequest: () => ({ body: {} }),
  mapAnswer: () => ({}),
  usage: USAGE,
  stream: { terminal: 'end', map: () => null },
};

function problems(candidate: Record<string, unknown>): readonly string[] {
  try {
    validatePlugin('acme', candidate);
  } catch (error) {
    if (error instanceof PluginLoadError) return error.problems;
    throw error;
  }
  return [];
}

const CONTEXT: AdapterContext = {
  route: 'chat-completions',
  model: 'acme/one',
  upstreamModel: 'one',
  stream: true,
  requestId: 'r1',
  created: 1,
};
const EVENT: SseEvent = { event: 'chunk', data: '{"say":"hi"}' };

/** The guarded adapter of a plugin whose hooks are `hooks`. */
function guarded(hooks: Record<string, unknown>): RouteAdapter {
  return (validatePlugin('acme', adapted({ ...WHOLE, ...hooks })) as ProviderPlugin).routes['chat-completions']!
    .adapter!;
}

function faultOf(call: () => unknown): PluginFault {
  try {
    call();
  } catch (error) {
    if (isPluginFault(error)) return error;
    throw error;
  }
  throw new Error('no plugin fault');
}

describe('a route adapter at load', () => {
  it('accepts a whole adapter, on any compatible route, with or without a stream mapping', () => {
    expect(problems(adapted(WHOLE))).to.deep.equal([]);
    const { stream: _stream, ...jsonOnly } = WHOLE;
    expect(problems(adapted({ ...jsonOnly, checkRequest: () => [], mapError: () => undefined }))).to.deep.equal([]);
    expect(
      problems(
        adapted({
          ...WHOLE,
          stream: {
            terminal: (event: SseEvent) => event.event === 'end',
            error: 'fault',
            createState: () => ({}),
            map: () => null,
          },
        }),
      ),
    ).to.deep.equal([]);
  });

  it('names every missing or misspelled hook at once, with the field', () => {
    expect(
      problems(
        adapted({
          buildRequest: () => ({ body: {} }),
          mapAnswr: () => ({}),
          stream: { terminal: 'end', mapp: () => null },
        }),
      ),
    ).to.deep.equal([
      "plugin 'acme': routes.chat-completions.adapter.mapAnswr: unknown field: did you mean 'mapAnswer'?",
      "plugin 'acme': routes.chat-completions.adapter.mapAnswer: missing: a function",
      "plugin 'acme': routes.chat-completions.adapter.usage: missing: the vendor's usage reader, { fromBody, fromStreamEvent }",
      "plugin 'acme': routes.chat-completions.adapter.stream.mapp: unknown field: did you mean 'map'?",
      "plugin 'acme': routes.chat-completions.adapter.stream.map: missing: a function",
    ]);
  });

  it('refuses a stream mapping without a terminal event, and a terminal that is neither a name nor a function', () => {
    expect(problems(adapted({ ...WHOLE, stream: { map: () => null } }))[0]).to.contain(
      "routes.chat-completions.adapter.stream.terminal: missing: the event that completes the vendor's stream",
    );
    expect(problems(adapted({ ...WHOLE, stream: { terminal: 7, error: '', map: () => null } }))).to.deep.equal([
      "plugin 'acme': routes.chat-completions.adapter.stream.terminal: must be the vendor's event name (its `event:` field) or a function of the event that returns true for it",
      "plugin 'acme': routes.chat-completions.adapter.stream.error: must be the vendor's event name (its `event:` field) or a function of the event that returns true for it",
    ]);
  });

  it('refuses an adapter that is not an object, a usage reader without its two functions, and a stream on count_tokens', () => {
    expect(problems(adapted('yes' as never))).to.deep.equal([
      "plugin 'acme': routes.chat-completions.adapter: must be an object of hooks (buildRequest, mapAnswer, usage, and stream, checkRequest, mapError when needed)",
    ]);
    expect(problems(adapted({ ...WHOLE, usage: { fromBody: () => undefined } }))).to.deep.equal([
      "plugin 'acme': routes.chat-completions.adapter.usage: must have fromBody and fromStreamEvent functions",
    ]);
    const counting = {
      ...adapted(WHOLE),
      routes: { 'count-tokens': { path: '/count', format: 'count-tokens', auth: 'bearer', adapter: WHOLE } },
      models: [{ id: 'one', listed: true, routes: ['count-tokens'], pricing: { input: 1, cachedInput: 1, output: 2 } }],
    };
    expect(problems(counting)).to.deep.equal([
      "plugin 'acme': routes.count-tokens.adapter.stream: count_tokens answers never stream: remove it",
    ]);
  });
});

describe('a route adapter, guarded: a throw or a wrong shape is the plugin fault of that hook', () => {
  it('lets what the contract allows through', () => {
    const adapter = guarded({
      checkRequest: () => [{ field: 'tools', message: 'no tools' }],
      buildRequest: () => ({
        body: { engine: 'one' },
        path: '/v2/generate?stream=1',
        method: 'PUT',
        headers: { accept: 'text/event-stream', 'x-parley-version': '2' },
      }),
      mapError: () => ({ message: 'busy', type: 'rate_limit_error', code: 'overloaded', status: 429 }),
    });
    expect(adapter.checkRequest!({ ...CONTEXT, body: {} })).to.deep.equal([{ field: 'tools', message: 'no tools' }]);
    expect(adapter.buildRequest({ ...CONTEXT, body: {} }).method).to.equal('PUT');
    expect(adapter.mapError!({ status: 503, body: {} }, CONTEXT)).to.include({ status: 429 });
    for (const legal of [
      undefined,
      null,
      [],
      { data: 'x' },
      [
        { data: 'a', event: 'b' },
        { data: 'c', id: '1' },
      ],
    ]) {
      expect(
        guarded({ stream: { terminal: 'end', map: () => legal } }).stream!.map(EVENT, undefined, CONTEXT),
      ).to.equal(legal);
    }
  });

  const cases: [string, Record<string, unknown>, (adapter: RouteAdapter) => unknown, string, string][] = [
    [
      'checkRequest returning a string',
      { checkRequest: () => 'no' },
      (a) => a.checkRequest!({ ...CONTEXT, body: {} }),
      'checkRequest',
      'returned "no";',
    ],
    [
      'checkRequest returning problems without a message',
      { checkRequest: () => [{ field: 'x' }] },
      (a) => a.checkRequest!({ ...CONTEXT, body: {} }),
      'checkRequest',
      'returned a list whose item 0 is an object;',
    ],
    [
      'buildRequest returning a list as the body',
      { buildRequest: () => ({ body: [] }) },
      (a) => a.buildRequest({ ...CONTEXT, body: {} }),
      'buildRequest',
      'returned { body: a list };',
    ],
    [
      'buildRequest returning a path without its slash',
      { buildRequest: () => ({ body: {}, path: 'v2/generate' }) },
      (a) => a.buildRequest({ ...CONTEXT, body: {} }),
      'buildRequest',
      'returned { body: an object, path: "v2/generate" };',
    ],
    [
      'buildRequest asking for GET',
      { buildRequest: () => ({ body: {}, method: 'GET' }) },
      (a) => a.buildRequest({ ...CONTEXT, body: {} }),
      'buildRequest',
      "method 'POST' or 'PUT'",
    ],
    [
      "buildRequest setting the route's credential header",
      { buildRequest: () => ({ body: {}, headers: { authorization: 'Token x' } }) },
      (a) => a.buildRequest({ ...CONTEXT, body: {} }),
      'buildRequest',
      'no credential',
    ],
    [
      'buildRequest setting content-length',
      { buildRequest: () => ({ body: {}, headers: { 'content-length': '3' } }) },
      (a) => a.buildRequest({ ...CONTEXT, body: {} }),
      'buildRequest',
      'content-length',
    ],
    [
      'mapAnswer returning a list',
      { mapAnswer: () => [] },
      (a) => a.mapAnswer({}, CONTEXT),
      'mapAnswer',
      'returned a list of 0;',
    ],
    [
      'mapAnswer throwing',
      {
        mapAnswer: () => {
          throw new Error('no reply');
        },
      },
      (a) => a.mapAnswer({}, CONTEXT),
      'mapAnswer',
      'threw: no reply',
    ],
    [
      'stream.map returning 42',
      { stream: { terminal: 'end', map: () => 42 } },
      (a) => a.stream!.map(EVENT, undefined, CONTEXT),
      'stream.map',
      'returned 42;',
    ],
    [
      'stream.map returning a list with a number',
      { stream: { terminal: 'end', map: () => [{ data: 'x' }, 7] } },
      (a) => a.stream!.map(EVENT, undefined, CONTEXT),
      'stream.map',
      'returned a list whose item 1 is 7;',
    ],
    [
      'stream.terminal returning a string',
      { stream: { terminal: () => 'yes', map: () => null } },
      (a) => (a.stream!.terminal as (event: SseEvent) => boolean)(EVENT),
      'stream.terminal',
      'returned "yes"; stream.terminal returns true or false',
    ],
    [
      'stream.createState throwing',
      {
        stream: {
          terminal: 'end',
          createState: () => {
            throw new Error('no state');
          },
          map: () => null,
        },
      },
      (a) => a.stream!.createState!(CONTEXT),
      'stream.createState',
      'threw: no state',
    ],
    [
      'mapError returning a status out of range',
      { mapError: () => ({ message: 'x', status: 200 }) },
      (a) => a.mapError!({ status: 500, body: {} }, CONTEXT),
      'mapError',
      'status?: an integer from 400 to 599',
    ],
    [
      'usage.fromBody returning a string',
      { usage: { fromBody: () => 'many', fromStreamEvent: () => undefined } },
      (a) => a.usage.fromBody({}),
      'usage.fromBody',
      'returned "many";',
    ],
    [
      'usage.fromStreamEvent returning counts as strings',
      {
        usage: {
          fromBody: () => undefined,
          fromStreamEvent: () => ({ inputTokens: '1', outputTokens: 1, cachedTokens: 0 }),
        },
      },
      (a) => a.usage.fromStreamEvent(undefined, EVENT),
      'usage.fromStreamEvent',
      'returned { inputTokens: "1"',
    ],
  ];
  for (const [what, hooks, call, hook, message] of cases) {
    it(what, () => {
      const fault = faultOf(() => call(guarded(hooks)));
      expect(fault.plugin).to.equal('acme');
      expect(fault.hook).to.equal(`routes.chat-completions.adapter.${hook}`);
      expect(fault.message).to.contain(message);
    });
  }
});
