import { definePlugin, type ProviderPlugin } from '../../src/plugins/plugin-contract.ts';

const pricing = { input: 1, cachedInput: 0.1, output: 2 };
const chatCompletions = { path: '/chat/completions', format: 'chat-completions', auth: 'bearer' } as const;

/** Two small made-up providers that exercise every registry feature. */
export function samplePlugins(): ProviderPlugin[] {
  const acme = definePlugin({
    contract: 1,
    vendor: 'acme',
    routes: {
      'chat-completions': chatCompletions,
      responses: { path: '/responses', format: 'responses', auth: 'bearer', modelIds: ['prefixed', 'native'] },
    },
    models: [
      { id: 'one', listed: true, routes: ['chat', 'chat-completions', 'responses'], pricing, webSearch: true },
      { id: 'hidden', listed: false, routes: ['chat-completions'], pricing, upstreamModel: 'hidden-2026' },
      {
        id: 'two',
        listed: true,
        routes: ['chat', 'chat-completions', 'responses'],
        pricing,
        upstreamModels: { responses: 'two-r' },
      },
    ],
    aliases: [{ id: 'acme-latest', target: 'acme/one', routes: ['chat', 'chat-completions', 'responses'] }],
    nativeChat: {
      route: 'chat-completions',
      buildRequest: (request) => ({
        model: request.upstreamModel,
        messages: [{ role: 'user', content: request.input }],
        effort: 'low',
        ...(request.temperature === undefined ? {} : { temperature: request.temperature }),
        ...(request.maxOutputTokens === undefined ? {} : { max_tokens: request.maxOutputTokens }),
        ...(request.webSearch ? { tools: [{ type: 'search' }] } : {}),
      }),
      readText: (body) => (body as { text?: string }).text,
    },
  });
  const bolt = definePlugin({
    contract: 1,
    vendor: 'bolt',
    routes: {
      'chat-completions': chatCompletions,
      messages: { path: '/messages', format: 'messages', auth: 'x-api-key', modelIds: ['native'] },
    },
    models: [{ id: 'bolt-1', listed: true, routes: ['chat-completions', 'messages'], pricing }],
    aliases: [{ id: 'bolt-latest', target: 'bolt/bolt-1', routes: ['chat-completions', 'messages'] }],
  });
  return [acme, bolt];
}
