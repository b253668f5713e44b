/** One valid request body of the conformance corpus, as a client sends it. */
export interface CorpusEntry {
  readonly name: string;
  /** Where the body's shape is defined: the SDK package and version, its file, and the request type (and member). */
  readonly source: string;
  /** The exact bytes the client sends (UTF-8 JSON text). */
  readonly body: string;
  /**
   * What the upstream must receive when it differs from the client body by more than the model (include_usage on Chat
   * Completions streams).
   */
  readonly upstream?: string;
}

export const OPENAI_CHAT = 'openai@6.49.0 resources/chat/completions/completions.d.ts';
export const OPENAI_RESPONSES = 'openai@6.49.0 resources/responses/responses.d.ts';
export const OPENAI_SHARED = 'openai@6.49.0 resources/shared.d.ts';
export const ANTHROPIC_MESSAGES = '@anthropic-ai/sdk@1.12.0 resources/messages/messages.d.ts';
