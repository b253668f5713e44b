import type { ErrorFamily } from '../error-body.ts';
import type { GatewayError } from '../gateway-errors.ts';
import type { SseEvent, UsageExtractor, WireFormat } from '../../plugins/plugin-contract.ts';
import type { TextRules, GenAiRules } from './format-reading.ts';

/**
 * What an event before any content is: one that only opens the stream, the first content, or not an event of the format
 * at all.
 */
export type EarlyEvent = 'opening' | 'content' | 'malformed';

/**
 * Everything the gateway decides by an upstream route's wire format, in one static object per format
 * (`src/core/formats/<format>.ts`, looked up in `WIRE_FORMATS`): no `format ===` branch elsewhere.
 * The functions read no `this`, so they may be passed on unbound; the per-event ones (`isErrorEvent`,
 * `judgeEarlyEvent`, `isTerminalEvent`, `usage.fromStreamEvent`) allocate nothing for events they skip.
 */
export interface WireFormatRules {
  readonly format: WireFormat;
  /**
   * Judges an event that arrives before any content (see `awaitStreamStart`): an opening event only
   * opens a stream; anything else is content, so an unknown event is never held, unless its data is not
   * JSON (`malformed`, a failure of that endpoint).
   */
  readonly judgeEarlyEvent: (event: SseEvent) => EarlyEvent;
  /** Whether an event reports an error in place of an answer. */
  readonly isErrorEvent: (event: SseEvent) => boolean;
  /** Whether a streamed event is the format's terminal event, after which the answer is complete. */
  readonly isTerminalEvent: (event: SseEvent) => boolean;
  /** The standard usage extractor of the format (a plugin may declare its own for its models). */
  readonly usage: UsageExtractor;
  /** The generated text one streamed event's data adds, for estimates when a stream ends without usage. */
  readonly textOf: (data: string) => string;
  /**
   * One SSE event that reports a gateway error inside a stream whose status line is already sent, in
   * the format's own shape, so that each official SDK raises it as an API error. The caller ends the
   * stream after writing it.
   */
  readonly inBandError: (error: GatewayError) => Buffer;
  /** The error envelope of gateway-made errors on the client route that speaks this format. */
  readonly errorEnvelope: ErrorFamily;
  /**
   * Whether a streamed request is forwarded with `stream_options.include_usage` set, so that the stream reports usage.
   */
  readonly asksForStreamUsage: boolean;
  /** Whether a successful JSON answer must carry usage: one without is refused (502) rather than recorded as free. */
  readonly usageRequired: boolean;
  /** Whether an answer consumes tokens; a count_tokens answer only counts them and is recorded with zero tokens. */
  readonly consumesTokens: boolean;
  /** Whether the upstream names each SSE event after its data's `type` (recorded fixtures hold only the data). */
  readonly namesEventsByType: boolean;
  /**
   * The parts of a request body that open every turn of its conversation (the system prompt and the
   * first message), which a provider's prompt cache keeps: prompt-cache-aware routing hashes them to
   * keep a conversation on one endpoint. Empty when the body has none. Reads the parsed body, copies nothing.
   */
  readonly stablePrefix: (body: Record<string, unknown>) => readonly unknown[];
  /** Where the format's requests, answers and stream events keep their texts (what guardrails read and rewrite). */
  readonly texts: TextRules;
  /** What traces read of the format's answers and requests (the GenAI conventions). */
  readonly genAi: GenAiRules;
}
