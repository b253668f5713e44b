import { parentPort } from 'node:worker_threads';
import { countTokensBounded, loadTokenizer } from './token-estimate.ts';

/** A count asked of the tokenizer thread: `text` (or a leading sample of a text `chars` long). */
export interface CountRequest {
  readonly id: number;
  readonly text: string;
  readonly chars: number;
}

export type CountReply = { readonly id: number; readonly tokens: number } | { readonly id: number; readonly error: string };

// The body of the tokenizer thread (see tokenizer-thread.ts): loads the tokenizer on the first count
// and answers each count with the same bounded work as ever, one at a time.
const port = parentPort;
if (port) {
  port.on('message', (request: CountRequest) => {
    loadTokenizer()
      .then((count) => countTokensBounded(count, request.text, request.chars))
      .then(
        (tokens) => port.postMessage({ id: request.id, tokens } satisfies CountReply),
        (error: unknown) => port.postMessage({ id: request.id, error: error instanceof Error ? error.message : String(error) } satisfies CountReply),
      );
  });
}
