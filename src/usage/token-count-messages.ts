/** A count asked of the tokenizer thread: the slices cut from a text `chars` long (see `countedSlices`). */
export interface CountRequest {
  readonly id: number;
  readonly slices: readonly string[];
  readonly chars: number;
}

export type CountReply =
  { readonly id: number; readonly tokens: number } | { readonly id: number; readonly error: string };
