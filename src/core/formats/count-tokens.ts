import type { UsageExtractor } from '../../plugins/plugin-contract.ts';
import { completionsErrorChunk } from './chat-completions.ts';
import { parseObject, NO_EVENT_TEXTS } from './format-reading.ts';
import { messagesGenAi, messagesPrefix, messagesTexts } from './messages.ts';
import type { WireFormatRules } from './wire-format.ts';

/** count_tokens answers hold a count, not usage: the request consumed nothing and is recorded with zero tokens. */
const usage: UsageExtractor = { fromBody: () => undefined, fromStreamEvent: (seen) => seen };

/**
 * Messages count_tokens (`POST /v1/messages/count_tokens`): a JSON count, never streamed, so its stream
 * rules are the plainest (no opening or terminal event, no text).
 */
export const countTokens: WireFormatRules = {
  format: 'count-tokens',
  judgeEarlyEvent: (event) => (parseObject(event.data) ? 'content' : 'malformed'),
  isErrorEvent: (event) => event.event === 'error',
  isTerminalEvent: () => false,
  usage,
  textOf: () => '',
  // A count is never streamed; were one cut, it would end with the Chat Completions error chunk.
  inBandError: completionsErrorChunk,
  // Its client route sits under /v1/messages.
  errorEnvelope: 'messages-envelope',
  asksForStreamUsage: false,
  usageRequired: false,
  consumesTokens: false,
  namesEventsByType: false,
  stablePrefix: messagesPrefix,
  // A count reads the same request as Messages; its answer is a number.
  texts: { request: messagesTexts.request, answer: () => [], event: () => NO_EVENT_TEXTS, knows: () => true },
  // A count names no model and has no end; its request is a Messages request.
  genAi: {
    fromBody: () => {},
    fromStreamEvent: () => {},
    answerText: () => '',
    inputMessages: messagesGenAi.inputMessages,
  },
};
