import type { SseEvent, WireFormat } from '../plugins/plugin-contract.ts';

/**
 * How an answer ended, as its usage record tells it:
 * - `complete`: the answer was delivered whole (a stream reached its format's terminal event);
 * - `upstream_cut`: the upstream's answer ended before its terminal event (connection dropped, body
 *   broke off, or an event the gateway refused to relay ended the stream);
 * - `client_closed`: the client went away before the end;
 * - `client_stalled`: the client stopped reading (its connection's buffers stayed full for the client
 *   write timeout); the gateway ended the answer and dropped the upstream;
 * - `stalled`: a stream ended because the upstream stopped sending.
 */
export type UsageOutcome = 'complete' | 'upstream_cut' | 'client_closed' | 'client_stalled' | 'stalled';

// Matched on the raw data, so that the relay does not parse every event a second time; a string value
// of `finish_reason` is a finish (the other chunks carry `null`).
const CHAT_FINISH = /"finish_reason"\s*:\s*"/;
const MESSAGES_STOP = /"type"\s*:\s*"message_stop"/;
const RESPONSES_END = /"type"\s*:\s*"response\.(completed|incomplete|failed)"/;
const RESPONSES_END_EVENTS = new Set(['response.completed', 'response.incomplete', 'response.failed']);

/**
 * Whether a streamed event is its format's terminal event, after which the answer is complete: Chat
 * Completions `[DONE]` or a chunk with a `finish_reason`; Messages `message_stop`; Responses
 * `response.completed`, `response.incomplete` or `response.failed` (named or data-only frames).
 * A named event is terminal by its name.
 */
export function isTerminalEvent(format: WireFormat, event: SseEvent): boolean {
  if (format === 'chat-completions') return event.data === '[DONE]' || CHAT_FINISH.test(event.data);
  // A named event is judged by its name alone (no scan of its data); data-only frames (some relays) by their type.
  if (format === 'messages') return event.event !== undefined ? event.event === 'message_stop' : MESSAGES_STOP.test(event.data);
  if (format === 'responses') return event.event !== undefined ? RESPONSES_END_EVENTS.has(event.event) : RESPONSES_END.test(event.data);
  return false;
}
