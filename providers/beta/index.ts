import { definePlugin, type ModelPricing, type UpstreamRoute } from '../../src/plugins/plugin-contract.ts';
import { chatCompletionsRoute } from '../shared/chat-completions.ts';
import { betaNativeChat } from './native-chat.ts';

const routes = ['chat', 'chat-completions', 'messages', 'count-tokens'] as const;
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

/** The beta-compatible Messages routes: bare model IDs (Set M), `x-api-key`, the client's version headers. */
const messagesRoute = (path: string, format: 'messages' | 'count-tokens'): UpstreamRoute => ({
  path,
  format,
  auth: 'x-api-key',
  modelIds: ['native'],
  forwardHeaders: ['anthropic-version', 'anthropic-beta'],
  defaultHeaders: { 'anthropic-version': '2023-06-01' },
});

export default definePlugin({
  contract: 1,
  vendor: 'beta',
  routes: {
    'chat-completions': chatCompletionsRoute,
    messages: messagesRoute('/messages', 'messages'),
    'count-tokens': messagesRoute('/messages/count_tokens', 'count-tokens'),
  },
  models: [
    model('beta-fable-5-1', true, { input: 6, cachedInput: 0.6, output: 30 }),
    model('beta-opus-5-5', false, { input: 5.5, cachedInput: 0.55, output: 27.5 }),
    model('beta-fable-5', true, { input: 5, cachedInput: 0.5, output: 25 }),
    model('beta-opus-5', true, { input: 4.5, cachedInput: 0.45, output: 22.5 }),
    model('beta-opus-4-8', true, { input: 4, cachedInput: 0.4, output: 20 }),
    model('beta-opus-4-7', true, { input: 3.75, cachedInput: 0.375, output: 18.75 }),
    model('beta-opus-4-6', true, { input: 3.5, cachedInput: 0.35, output: 17.5 }),
    model('beta-sonnet-4-6', true, { input: 3, cachedInput: 0.3, output: 15 }),
  ],
  aliases: [{ id: 'beta-latest', target: 'beta/beta-fable-5-1', routes }],
  nativeChat: betaNativeChat,
});
