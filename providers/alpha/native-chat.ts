import type { NativeChatAdapter } from '../../src/plugins/plugin-contract.ts';

interface ResponsesOutput {
  output?: { type?: string; content?: { type?: string; text?: unknown }[] }[];
}

/** The text parts of a Responses answer's message items, joined. */
export function readResponsesText(body: unknown): string | undefined {
  const parts = ((body as ResponsesOutput | null)?.output ?? [])
    .filter((item) => item.type === 'message')
    .flatMap((item) => item.content ?? [])
    .filter((part) => part.type === 'output_text' && typeof part.text === 'string')
    .map((part) => part.text as string);
  return parts.length ? parts.join('') : undefined;
}

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
