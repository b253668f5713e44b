import { WIRE_FORMATS } from '../../core/formats/index.ts';
import type { SseEvent, TokenUsage, WireFormat } from '../../plugins/plugin-contract.ts';

/**
 * The usage an answer carries where its wire format keeps it, read when a plugin's own usage
 * extractor failed on it: the upstream's figures stand for the record rather than an estimate.
 * Undefined when the answer holds none there.
 */
export function standardBodyUsage(format: WireFormat, body: unknown): TokenUsage | undefined {
  try {
    return WIRE_FORMATS[format].usage.fromBody(body);
  } catch {
    return undefined;
  }
}

/** {@link standardBodyUsage} for one stream event, over what was read before it. */
export function standardEventUsage(
  format: WireFormat,
  seen: TokenUsage | undefined,
  event: SseEvent,
): TokenUsage | undefined {
  try {
    return WIRE_FORMATS[format].usage.fromStreamEvent(seen, event) ?? seen;
  } catch {
    return seen;
  }
}
