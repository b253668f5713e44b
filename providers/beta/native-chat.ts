import type { NativeChatAdapter } from '../../src/plugins/plugin-contract.ts';
import { readMessagesText } from '../shared/text-readers.ts';

/** `max_tokens` is required by the Messages API; this is the cap when the caller sets none. */
const DEFAULT_MAX_TOKENS = 1024;

/**
 * Native chat over the Messages API. The provider's low preset is `output_config.effort: "low"`, not
 * extended thinking with a small budget: a thinking budget must stay below `max_tokens` (so a low
 * caller limit would be refused) and forbids a custom `temperature`, while effort has neither catch.
 */
export const betaNativeChat: NativeChatAdapter = {
  route: 'messages',
  buildRequest: (request) => ({
    model: request.upstreamModel,
    max_tokens: request.maxOutputTokens ?? DEFAULT_MAX_TOKENS,
    messages: [{ role: 'user', content: request.input }],
    output_config: { effort: 'low' },
    ...(request.temperature === undefined ? {} : { temperature: request.temperature }),
    ...(request.webSearch ? { tools: [{ type: 'web_search_20250305', name: 'web_search' }] } : {}),
  }),
  readText: readMessagesText,
};
