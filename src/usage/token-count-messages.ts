/** A count asked of the tokenizer thread: `text` (or a leading sample of a text `chars` long). */
export interface CountRequest {
  readonly id: number;
  readonly text: string;
  readonly chars: number;
}

export type CountReply =
  { readonly id: number; readonly tokens: number } | { readonly id: number; readonly error: string };
