import { definePlugin } from '../../src/plugins/plugin-contract.ts';
import { chatCompletionsAdapter, chatCompletionsRoute } from '../shared/chat-completions.ts';

const routes = ['chat', 'chat-completions'] as const;

export default definePlugin({
  contract: 1,
  vendor: 'delta',
  routes: { 'chat-completions': chatCompletionsRoute },
  models: [
    {
      id: 'delta-4.7',
      listed: true,
      routes,
      pricing: { input: 0.6, cachedInput: 0.06, output: 2.2 },
      maxOutputTokens: 32_768,
    },
    {
      id: 'delta-4.6',
      listed: true,
      routes,
      pricing: { input: 0.5, cachedInput: 0.05, output: 2 },
      maxOutputTokens: 32_768,
    },
    {
      id: 'delta-4.5',
      listed: true,
      routes,
      pricing: { input: 0.4, cachedInput: 0.04, output: 1.6 },
      maxOutputTokens: 32_768,
    },
  ],
  nativeChat: chatCompletionsAdapter(),
});
