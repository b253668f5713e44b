import type { Dispatcher } from 'undici';
import type { GatewayError } from '../../core/gateway-errors.ts';
import type { UpstreamBody } from '../sse/upstream-body.ts';

type Headers = Dispatcher.ResponseData['headers'];

/** An upstream's answer as read so far, with the credential of the endpoint it came from (to redact). */
export type CompatibleAnswer =
  | {
      readonly kind: 'stream';
      readonly status: number;
      readonly headers: Headers;
      readonly body: UpstreamBody;
      readonly apiKey?: string;
    }
  | {
      readonly kind: 'json';
      readonly status: number;
      readonly headers: Headers;
      readonly bytes: Buffer;
      readonly apiKey?: string;
    }
  | { readonly kind: 'auth-rejected'; readonly status: number; readonly provider: string };

/**
 * A failed attempt: the upstream's own retryable answer (returned as it came if it is the last), or the gateway's
 * error.
 */
export type CompatibleFailure = Extract<CompatibleAnswer, { kind: 'json' }> | GatewayError;

/** The bounds of every upstream wait and read, fixed at start. */
export interface UpstreamBounds {
  /** `UPSTREAM_TIMEOUT_MS`: the outer bound of every wait for headers and between body chunks. */
  readonly timeoutMs: number;
  /** Longest wait for an upstream's headers and a stream's first content event before failing over, in ms. */
  readonly firstByteTimeoutMs: number;
  /** Longest silence of a stream once content flows, in ms. */
  readonly idleTimeoutMs: number;
  /** Largest upstream JSON answer the gateway reads, in bytes. */
  readonly bodyLimitBytes: number;
  /** Largest single SSE event relayed; a larger one ends the stream with an in-band error. */
  readonly maxSseEventBytes: number;
}
