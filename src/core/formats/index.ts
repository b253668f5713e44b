import type { UpstreamRoute, WireFormat } from '../../plugins/plugin-contract.ts';
import { chatCompletions } from './chat-completions.ts';
import { countTokens } from './count-tokens.ts';
import { messages } from './messages.ts';
import { responses } from './responses.ts';
import type { WireFormatRules } from './wire-format.ts';

export type { EarlyEvent, WireFormatRules } from './wire-format.ts';
export type { AnswerFacts, GenAiMessage, GenAiRules } from './format-reading.ts';

/**
 * The rules of each wire format (in the order plugin validation lists them). Callers look a format up here instead of
 * branching on it.
 */
export const WIRE_FORMATS: Readonly<Record<WireFormat, WireFormatRules>> = {
  'chat-completions': chatCompletions,
  responses,
  messages,
  'count-tokens': countTokens,
};

/** Whether two upstream routes speak the same wire format (two absent routes count as the same). */
export function sameWireFormat(a: UpstreamRoute | undefined, b: UpstreamRoute | undefined): boolean {
  return a?.format === b?.format;
}
