import type { Readable } from 'node:stream';

/** Whether a byte stream has no more data to give: ended, or its end is known and nothing is left to read. */
export function hasEnded(readable: Readable): boolean {
  // `readableEnded` turns true only with the 'end' event, a tick after the last read. The stream's state
  // knows sooner, and acting on it lets the caller end its own answer in the same tick as the last write
  // (one socket write for both rather than two).
  return (
    readable.readableEnded ||
    ((readable as unknown as { _readableState?: { ended?: boolean } })._readableState?.ended === true &&
      readable.readableLength === 0)
  );
}

/**
 * The chunks of a byte stream, everything it holds at once: what arrived together (one socket read
 * often carries many small SSE chunks) comes out as one, so a burst is split, tapped and written once
 * rather than once per upstream chunk. Ends as the stream ends, and fails as it fails. Stopped early,
 * the stream is destroyed (the rest of the body is not wanted).
 */
export async function* readableBatches(readable: Readable): AsyncGenerator<Buffer> {
  let wake: (() => void) | undefined;
  const signal = () => {
    const waiting = wake;
    wake = undefined;
    waiting?.();
  };
  readable.on('readable', signal);
  readable.on('end', signal);
  readable.on('error', signal);
  readable.on('close', signal);
  try {
    for (;;) {
      const chunk = readable.read() as Buffer | null;
      if (chunk !== null) {
        yield chunk;
        continue;
      }
      if (readable.errored) throw readable.errored;
      if (hasEnded(readable)) return;
      if (readable.destroyed)
        throw Object.assign(new Error('the upstream body closed before its end'), {
          code: 'ERR_STREAM_PREMATURE_CLOSE',
        });
      await new Promise<void>((resolve) => (wake = resolve));
    }
  } finally {
    readable.off('readable', signal);
    readable.off('end', signal);
    readable.off('error', signal);
    readable.off('close', signal);
    if (!hasEnded(readable)) discard(readable);
  }
}

/** Drops the rest of a byte stream; the error its destruction may raise (an aborted request) is expected. */
export function discard(readable: Readable): void {
  readable.on('error', () => {});
  readable.destroy();
}

/** Whether an async iterable of bytes is a node byte stream (which {@link readableBatches} can read). */
export function isByteReadable(upstream: AsyncIterable<Uint8Array>): upstream is Readable {
  const candidate = upstream as Partial<Readable>;
  return (
    typeof candidate.read === 'function' && typeof candidate.on === 'function' && candidate.readableObjectMode === false
  );
}
