import type { Readable } from 'node:stream';

const ignore = () => {};

/**
 * The stream's bytes, or `onTooLarge()`'s error as soon as they pass `limitBytes`. Event-driven: cheaper
 * than an async iterator. `onTooLarge()` may destroy the stream: the error that destroying emits is
 * swallowed here (the caller already has its answer), never left without a listener to crash the process.
 */
export function readLimited(stream: Readable, limitBytes: number, onTooLarge: () => Error): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const cleanup = () => {
      stream.off('data', onData);
      stream.off('end', onEnd);
      stream.off('error', onError);
      stream.off('close', onClose);
    };
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size > limitBytes) {
        cleanup();
        stream.on('error', ignore);
        stream.pause();
        reject(onTooLarge());
        return;
      }
      chunks.push(chunk);
    };
    const onEnd = () => {
      cleanup();
      resolve(chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, size));
    };
    const onError = (error: Error) => {
      cleanup();
      reject(error);
    };
    const onClose = () => {
      cleanup();
      reject(new Error('the stream closed before its end'));
    };
    stream.on('data', onData);
    stream.on('end', onEnd);
    stream.on('error', onError);
    stream.on('close', onClose);
  });
}
