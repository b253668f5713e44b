import { parentPort } from 'node:worker_threads';
import type { CountReply, CountRequest } from './token-count-messages.ts';
import { countSlicesBounded, loadTokenizer } from './token-count.ts';

// The body of the tokenizer thread (see tokenizer-thread.ts): loads the tokenizer on the first count
// and answers each count with the same bounded work as ever, one at a time.
const port = parentPort;
if (port) {
  port.on('message', (request: CountRequest) => {
    loadTokenizer()
      .then((count) => countSlicesBounded(count, request.slices, request.chars))
      .then(
        (tokens) => port.postMessage({ id: request.id, tokens } satisfies CountReply),
        (error: unknown) =>
          port.postMessage({
            id: request.id,
            error: error instanceof Error ? error.message : String(error),
          } satisfies CountReply),
      );
  });
}
