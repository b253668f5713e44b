import type { NativeChatAdapter } from '../../src/plugins/plugin-contract.ts';

/** The text blocks of a Messages answer, joined. */
export function readMessagesText(body: unknown): string | undefined {
  const blocks = ((body as { content?: { type?: string; text?: unknown }[] } | null)?.content ?? [])
    .filter((block) => block.type === 'text' && typeof block.text === 'string')
    .map((block) => block.text as string);
  return blocks.length ? blocks.join('') : undefined;
}

/**
 * Native chat over the Messages API. The provider's low reasoning preset is its `effort` output
 * setting at `low` (extended thinking stays off), so answers are quick and cheap.
 */
export const betaNativeChat: NativeChatAdapter = {
  route: 'messages',
  buildRequest: (request) => ({
    model: request.upstreamModel,
    max_tokens: request.maxOutputTokens ?? 4096,
    messages: [{ role: 'user', content: request.input }],
    output_config: { effort: 'low' },
    ...(request.temperature === undefined ? {} : { temperature: request.temperature }),
    ...(request.webSearch ? { tools: [{ type: 'web_search_20250305', name: 'web_search' }] } : {}),
  }),
  readText: readMessagesText,
};
