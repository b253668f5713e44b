import type { Readable } from 'node:stream';
import { discard, isByteReadable, readableBatches } from './readable-batches.ts';

/** Takes an upstream body's bytes as they arrive, then its end or its failure (exactly one of the two). */
export interface BodySink {
  data(chunk: Uint8Array): void;
  end(): void;
  error(error: unknown): void;
  /**
   * A hook between the upstream and the sink (a plugin's stream fixup) failed: the sink stops as for a
   * fault of its own hooks, after what was handed on before it. Absent: told as `error`.
   */
  fault?(error: unknown): void;
}

/**
 * An upstream body read by pushing: a sink is attached and handed every chunk, in order, as it comes;
 * `pause()` stops the flow (the upstream socket is no longer read) until `resume()`. No stream object
 * and no promise per chunk: one call per socket read. `abort()` drops the rest (the upstream request
 * is cancelled); the sink then hears nothing more.
 */
export interface UpstreamBody {
  attach(sink: BodySink): void;
  pause(): void;
  resume(): void;
  abort(): void;
}

/**
 * An async iterable of bytes as an {@link UpstreamBody} (a node byte stream is read a batch at a time),
 * for callers and tests that hold one.
 */
export function iterableBody(source: AsyncIterable<Uint8Array>): UpstreamBody {
  const readable: Readable | undefined = isByteReadable(source) ? source : undefined;
  const iterator: AsyncIterator<Uint8Array> = readable ? readableBatches(readable) : source[Symbol.asyncIterator]();
  let paused = false;
  let stopped = false;
  let wake: (() => void) | undefined;
  return {
    attach(sink) {
      void (async () => {
        try {
          for (;;) {
            while (paused && !stopped) await new Promise<void>((resolve) => (wake = resolve));
            if (stopped) return;
            const next = await iterator.next();
            if (stopped) return;
            if (next.done) return sink.end();
            sink.data(next.value);
          }
        } catch (error) {
          if (!stopped) sink.error(error);
        }
      })();
    },
    pause() {
      paused = true;
    },
    resume() {
      paused = false;
      const waiting = wake;
      wake = undefined;
      waiting?.();
    },
    abort() {
      if (stopped) return;
      stopped = true;
      this.resume();
      void iterator.return?.(undefined)?.catch(() => {});
      if (readable) discard(readable);
    },
  };
}
