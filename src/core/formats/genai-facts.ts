import type { SseEvent } from '../../plugins/plugin-contract.ts';
import { isObject, text, type Json } from './event-data.ts';

/** What a trace reads of an upstream's answer beside its usage: the model that answered, its id, why it stopped. */
export interface AnswerFacts {
  model?: string;
  id?: string;
  finishReasons?: string[];
}

/** A message in the GenAI conventions' shape (`gen_ai.input.messages`): a role and its parts. */
export interface GenAiMessage {
  readonly role: string;
  readonly parts: readonly Record<string, unknown>[];
}

/**
 * What the GenAI conventions read of a wire format: the facts of a whole answer and of a stream, event
 * by event (only for a request whose trace records), and, for operators who opted in to message
 * capture, the prompt and the answer's text.
 */
export interface GenAiRules {
  /** Adds the facts of a whole JSON answer. */
  readonly fromBody: (body: unknown, facts: AnswerFacts) => void;
  /** Adds what one streamed event says; cheap for events that carry none of it (no parse). */
  readonly fromStreamEvent: (event: SseEvent, facts: AnswerFacts) => void;
  /** The generated text of a whole JSON answer. */
  readonly answerText: (body: unknown) => string;
  /** The request's system instructions and messages. */
  readonly inputMessages: (body: Record<string, unknown>) => {
    readonly system?: readonly Record<string, unknown>[];
    readonly messages: readonly GenAiMessage[];
  };
}

/** Sets the answer's model and id once (the first event that names them). */
export function noteModel(facts: AnswerFacts, source: Json | undefined): void {
  if (!source) return;
  if (facts.model === undefined && typeof source.model === 'string') facts.model = source.model;
  if (facts.id === undefined && typeof source.id === 'string') facts.id = source.id;
}

/** Adds a finish reason (a string), once each. */
export function noteFinish(facts: AnswerFacts, reason: unknown): void {
  if (typeof reason !== 'string' || reason === '') return;
  const reasons = (facts.finishReasons ??= []);
  if (!reasons.includes(reason)) reasons.push(reason);
}

/**
 * A message's content as the conventions' parts: a string is one text part; a list keeps its text
 * parts' text and names the type of the others (images, files, tool blocks) without their data.
 */
export function contentParts(content: unknown): Record<string, unknown>[] {
  if (typeof content === 'string') return [{ type: 'text', content }];
  if (!Array.isArray(content)) return [];
  return content.map((part: unknown) => {
    if (!isObject(part)) return { type: 'unknown' };
    const type = text(part.type) || 'unknown';
    if (type === 'text' || type === 'input_text' || type === 'output_text')
      return { type: 'text', content: text(part.text) };
    if (type === 'tool_use') return { type: 'tool_call', id: part.id, name: part.name, arguments: part.input };
    if (type === 'tool_result') return { type: 'tool_call_response', id: part.tool_use_id, response: part.content };
    return { type };
  });
}

/** A list of `{ role, content }` messages as the conventions' messages. */
export function roleMessages(messages: unknown): GenAiMessage[] {
  if (!Array.isArray(messages)) return [];
  return messages.filter(isObject).map((message) => {
    const parts = contentParts(message.content);
    for (const call of Array.isArray(message.tool_calls) ? (message.tool_calls as Json[]) : []) {
      parts.push({ type: 'tool_call', id: call?.id, name: call?.function?.name, arguments: call?.function?.arguments });
    }
    return { role: text(message.role) || 'user', parts };
  });
}
