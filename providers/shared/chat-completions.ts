import type { NativeChatAdapter, NativeChatRequest, UpstreamRoute } from '../../src/plugins/plugin-contract.ts';

/** The alpha-compatible Chat Completions route most providers expose. */
export const chatCompletionsRoute: UpstreamRoute = { path: '/chat/completions', format: 'chat-completions', auth: 'bearer' };

/** Text of the first choice of a Chat Completions answer. */
export function readChatCompletionText(body: unknown): string | undefined {
  const content = (body as { choices?: { message?: { content?: unknown } }[] } | null)?.choices?.[0]?.message?.content;
  return typeof content === 'string' ? content : undefined;
}

/**
 * A native chat adapter for a Chat Completions upstream: one user message, `reasoning_effort: "low"`
 * (the low reasoning preset), and the provider's web search tool when asked for.
 */
export function chatCompletionsAdapter(webSearchTool?: Record<string, unknown>): NativeChatAdapter {
  return {
    route: 'chat-completions',
    buildRequest: (request: NativeChatRequest) => ({
      model: request.upstreamModel,
      messages: [{ role: 'user', content: request.input }],
      reasoning_effort: 'low',
      ...(request.temperature === undefined ? {} : { temperature: request.temperature }),
      ...(request.maxOutputTokens === undefined ? {} : { max_completion_tokens: request.maxOutputTokens }),
      ...(request.webSearch && webSearchTool ? { tools: [webSearchTool] } : {}),
      stream: false,
    }),
    readText: readChatCompletionText,
  };
}
