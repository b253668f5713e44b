import { definePlugin, type ModelPricing } from '../../src/plugins/plugin-contract.ts';
import { chatCompletionsRoute } from '../shared/chat-completions.ts';
import { alphaNativeChat } from './native-chat.ts';

const routes = ['chat', 'chat-completions', 'responses'] as const;
// The most one answer may hold (its own `max_tokens` may not ask for more; reservations assume it when none is sent).
const MAX_OUTPUT_TOKENS = 32_768;
const model = (id: string, listed: boolean, pricing: ModelPricing) => ({
  id,
  listed,
  routes,
  pricing,
  webSearch: true,
  maxOutputTokens: MAX_OUTPUT_TOKENS,
});

export default definePlugin({
  contract: 1,
  vendor: 'alpha',
  routes: {
    'chat-completions': chatCompletionsRoute,
    // Set R accepts both `alpha/gen-6-astra` and the native `gen-6-astra`: one model entry.
    responses: { path: '/responses', format: 'responses', auth: 'bearer', modelIds: ['prefixed', 'native'] },
  },
  models: [
    model('gen-6-astra', true, { input: 3, cachedInput: 0.3, output: 18 }),
    model('gen-6.1-sol', false, { input: 2.5, cachedInput: 0.25, output: 15 }),
    model('gen-6-sol', false, { input: 1.75, cachedInput: 0.175, output: 14 }),
    model('gen-6-luna', false, { input: 0.4, cachedInput: 0.04, output: 2.4 }),
    model('gen-5.6-terra', true, { input: 1.25, cachedInput: 0.125, output: 10 }),
    model('gen-5.6-luna', true, { input: 0.25, cachedInput: 0.025, output: 2 }),
    model('gen-5.5', true, { input: 1, cachedInput: 0.1, output: 8 }),
  ],
  aliases: [{ id: 'alpha-latest', target: 'alpha/gen-6-astra', routes }],
  nativeChat: alphaNativeChat,
});
