import { definePlugin } from 'model-gateway/plugin';
import { chatCompletionsAdapter, parleyNativeChat } from './chat-completions.ts';

/**
 * Parley, a vendor with a wire format of its own (see parley-wire.ts), served to the official OpenAI
 * clients on /v1/chat/completions through a route adapter, and on /v1/chat. Its upstream is configured
 * with PARLEY_BASE_URL (e.g. https://api.parley.example, without /v2: the route's path carries it) and
 * PARLEY_API_KEY, sent as `Authorization: Token <key>`.
 */
export default definePlugin({
  contract: 1,
  vendor: 'parley',
  routes: {
    'chat-completions': {
      path: '/v2/generate',
      format: 'chat-completions',
      auth: { header: 'authorization', prefix: 'Token ' },
      adapter: chatCompletionsAdapter,
    },
  },
  models: [
    {
      id: 'quill-2',
      upstreamModel: 'quill-2-0925',
      listed: true,
      routes: ['chat', 'chat-completions'],
      // USD per million tokens; Parley has no prompt cache.
      pricing: { input: 0.8, cachedInput: 0.8, output: 3.2 },
      maxOutputTokens: 2048,
    },
    {
      id: 'quill-2-mini',
      listed: true,
      routes: ['chat', 'chat-completions'],
      pricing: { input: 0.2, cachedInput: 0.2, output: 0.8 },
      maxOutputTokens: 2048,
    },
  ],
  aliases: [{ id: 'parley-latest', target: 'parley/quill-2', routes: ['chat', 'chat-completions'] }],
  nativeChat: parleyNativeChat,
});
