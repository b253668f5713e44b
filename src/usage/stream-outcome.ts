/**
 * How an answer ended, as its usage record tells it:
 * - `complete`: the answer was delivered whole (a stream reached its format's terminal event,
 *   `WIRE_FORMATS[format].isTerminalEvent`);
 * - `upstream_cut`: the upstream's answer ended before its terminal event (connection dropped, body
 *   broke off, or an event the gateway refused to relay ended the stream);
 * - `client_closed`: the client went away before the end;
 * - `client_stalled`: the client stopped reading (its connection's buffers stayed full for the client
 *   write timeout); the gateway ended the answer and dropped the upstream;
 * - `stalled`: a stream ended because the upstream stopped sending.
 */
export type UsageOutcome = 'complete' | 'upstream_cut' | 'client_closed' | 'client_stalled' | 'stalled';
