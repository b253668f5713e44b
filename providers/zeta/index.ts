import { definePlugin } from '../../src/plugins/plugin-contract.ts';
import { chatCompletionsAdapter, chatCompletionsRoute } from '../shared/chat-completions.ts';

export default definePlugin({
  vendor: 'zeta',
  routes: { 'chat-completions': chatCompletionsRoute },
  models: [{ id: 'zeta-k3', listed: true, routes: ['chat', 'chat-completions'], pricing: { input: 0.6, cachedInput: 0.15, output: 2.5 } }],
  nativeChat: chatCompletionsAdapter(),
});
