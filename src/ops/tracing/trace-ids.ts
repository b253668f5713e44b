import type { IdGenerator } from '@opentelemetry/sdk-trace-base';

const SHARED = Buffer.allocUnsafe(16);

/** `bytes` random bytes as lower-case hex, never all zero (a W3C id must not be). */
function randomHex(bytes: 8 | 16): string {
  for (let index = 0; index < bytes; index += 4) SHARED.writeUInt32BE((Math.random() * 2 ** 32) >>> 0, index);
  if (
    SHARED.readUInt32BE(0) === 0 &&
    SHARED.readUInt32BE(4) === 0 &&
    (bytes === 8 || (SHARED.readUInt32BE(8) === 0 && SHARED.readUInt32BE(12) === 0))
  ) {
    SHARED[bytes - 1] = 1;
  }
  return SHARED.toString('hex', 0, bytes);
}

/**
 * Trace and span ids as the SDK's random generator makes them, with one addition: the trace id a
 * request's sampling was decided on can be handed to the next root span, so that the span the SDK
 * makes for a sampled request is in the trace that decision was made for.
 */
export class TraceIds implements IdGenerator {
  private next: string | undefined;

  /** A fresh trace id. */
  traceId(): string {
    return randomHex(16);
  }

  /** The trace id the next root span takes. */
  useNext(traceId: string): void {
    this.next = traceId;
  }

  generateTraceId(): string {
    const id = this.next ?? randomHex(16);
    this.next = undefined;
    return id;
  }

  generateSpanId(): string {
    return randomHex(8);
  }
}
