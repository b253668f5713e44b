import { definePlugin } from '../../src/plugins/plugin-contract.ts';
import { chatCompletionsAdapter, chatCompletionsRoute } from '../shared/chat-completions.ts';
import { dropEmptyFunctionCall } from './stream-fixups.ts';

const routes = ['chat', 'chat-completions'] as const;

export default definePlugin({
  contract: 1,
  vendor: 'epsilon',
  routes: { 'chat-completions': chatCompletionsRoute },
  models: [
    {
      id: 'epsilon-5.3-flash',
      listed: true,
      routes,
      pricing: { input: 0.28, cachedInput: 0.028, output: 1.1 },
      maxOutputTokens: 32_768,
    },
    {
      id: 'epsilon-5.2',
      listed: true,
      routes,
      pricing: { input: 0.55, cachedInput: 0.055, output: 2.2 },
      maxOutputTokens: 32_768,
    },
  ],
  streamFixups: [
    {
      name: 'drop-empty-function-call',
      route: 'chat-completions',
      models: ['epsilon/epsilon-5.3-flash'],
      fixup: dropEmptyFunctionCall,
    },
  ],
  nativeChat: chatCompletionsAdapter(),
});
