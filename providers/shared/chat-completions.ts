import type { NativeChatAdapter, NativeChatRequest, UpstreamRoute } from '../../src/plugins/plugin-contract.ts';
import { readChatCompletionText } from './text-readers.ts';

/** The alpha-compatible Chat Completions route every provider exposes. */
export const chatCompletionsRoute: UpstreamRoute = {
  path: '/chat/completions',
  format: 'chat-completions',
  auth: 'bearer',
};

/**
 * A native chat adapter for a Chat Completions upstream: one user message and `reasoning_effort: "low"`
 * (the low reasoning preset), plus the provider's web search tool when one is given and asked for.
 * The limit goes out as `max_tokens`, which every OpenAI-compatible upstream here reads;
 * `max_completion_tokens` is not understood by all of them.
 */
export function chatCompletionsAdapter(webSearchTool?: Readonly<Record<string, unknown>>): NativeChatAdapter {
  return {
    route: 'chat-completions',
    buildRequest: (request: NativeChatRequest) => ({
      model: request.upstreamModel,
      messages: [{ role: 'user', content: request.input }],
      reasoning_effort: 'low',
      ...(request.temperature === undefined ? {} : { temperature: request.temperature }),
      ...(request.maxOutputTokens === undefined ? {} : { max_tokens: request.maxOutputTokens }),
      ...(request.webSearch && webSearchTool ? { tools: [webSearchTool] } : {}),
      stream: false,
    }),
    readText: readChatCompletionText,
  };
}
