import type { NativeChatAdapter } from '../../src/plugins/plugin-contract.ts';
import { readResponsesText } from '../shared/text-readers.ts';

/** Native chat over the Responses API with `reasoning.effort: "low"`, the provider's low preset. */
export const alphaNativeChat: NativeChatAdapter = {
  route: 'responses',
  buildRequest: (request) => ({
    model: request.upstreamModel,
    input: request.input,
    reasoning: { effort: 'low' },
    ...(request.temperature === undefined ? {} : { temperature: request.temperature }),
    ...(request.maxOutputTokens === undefined ? {} : { max_output_tokens: request.maxOutputTokens }),
    ...(request.webSearch ? { tools: [{ type: 'web_search' }] } : {}),
    stream: false,
  }),
  readText: readResponsesText,
};
