import { definePlugin } from '../../src/plugins/plugin-contract.ts';
import { chatCompletionsAdapter, chatCompletionsRoute } from '../shared/chat-completions.ts';
import { gammaUsage } from './usage.ts';

const routes = ['chat', 'chat-completions'] as const;

/**
 * The provider's search grounding on its OpenAI-compatible endpoint, in the shape the OpenAI-compatible
 * relays in front of it turn into the native `googleSearch` tool: a function tool with that reserved
 * name and no parameters (Chat Completions has no built-in search tool type of its own).
 */
const searchGroundingTool = { type: 'function', function: { name: 'googleSearch' } } as const;

export default definePlugin({
  contract: 1,
  vendor: 'gamma',
  routes: { 'chat-completions': chatCompletionsRoute },
  models: [
    {
      id: 'gamma-3.1-pro-preview',
      listed: true,
      routes,
      webSearch: true,
      pricing: { input: 2, cachedInput: 0.2, output: 12 },
      maxOutputTokens: 32_768,
    },
    {
      id: 'gamma-3.8-flash',
      listed: true,
      routes,
      webSearch: true,
      pricing: { input: 0.3, cachedInput: 0.03, output: 2.5 },
      maxOutputTokens: 32_768,
    },
  ],
  aliases: [{ id: 'gamma-latest', target: 'gamma/gamma-3.1-pro-preview', routes }],
  usageExtractors: [{ route: 'chat-completions', extractor: gammaUsage }],
  nativeChat: chatCompletionsAdapter(searchGroundingTool),
});
