import { definePlugin } from '../../src/plugins/plugin-contract.ts';
import { chatCompletionsAdapter, chatCompletionsRoute } from '../shared/chat-completions.ts';

export default definePlugin({
  contract: 1,
  vendor: 'zeta',
  routes: { 'chat-completions': chatCompletionsRoute },
  models: [
    {
      id: 'zeta-k3',
      listed: true,
      routes: ['chat', 'chat-completions'],
      pricing: { input: 0.65, cachedInput: 0.065, output: 2.7 },
      maxOutputTokens: 32_768,
    },
  ],
  nativeChat: chatCompletionsAdapter(),
});
