import type { ClientResponse } from './client-response.ts';

/**
 * How waiting on a client to read ended: it took what was buffered (`taken`), its connection closed
 * first (`closed`), or it read nothing for the whole timeout (`stalled`: the response was destroyed,
 * closing the connection).
 */
export type ClientRead = 'taken' | 'closed' | 'stalled';

/**
 * Waits for the client to take the bytes the response buffered: its `drain` after a write returned
 * false, or its `finish` after `end()`. A client that reads nothing for `timeoutMs` would otherwise
 * hold the connection (and whatever feeds it) for ever; its response is destroyed. No timeout when
 * `timeoutMs` is undefined.
 */
export function awaitClientRead(
  res: ClientResponse,
  event: 'drain' | 'finish',
  timeoutMs: number | undefined,
): Promise<ClientRead> {
  if (event === 'finish' && res.writableFinished) return Promise.resolve('taken');
  if (res.destroyed) return Promise.resolve('closed');
  return new Promise((resolve) => {
    const settle = (outcome: ClientRead) => {
      clearTimeout(timer);
      res.off(event, taken);
      res.off('close', closed);
      resolve(outcome);
    };
    const taken = () => settle('taken');
    const closed = () => settle('closed');
    const timer =
      timeoutMs === undefined
        ? undefined
        : setTimeout(() => {
            settle('stalled');
            res.destroy();
          }, timeoutMs);
    res.once(event, taken);
    res.once('close', closed);
  });
}

/** Largest piece of a body written at once by {@link endForClient}. */
const PIECE_BYTES = 64 * 1024;

/**
 * Ends the response with `body` (its headers already set) and resolves once the client took all of it.
 * A large body goes out in pieces, each written once the client took the ones before, so that the
 * timeout measures a client that stopped reading, not a slow one: taking a piece per `timeoutMs` is
 * enough. The usual answer, taken by the socket at once, resolves without a timer.
 */
export async function endForClient(
  res: ClientResponse,
  body: Buffer | undefined,
  timeoutMs: number | undefined,
): Promise<ClientRead> {
  let at = 0;
  if (body) {
    for (; body.length - at > PIECE_BYTES; at += PIECE_BYTES) {
      if (!res.write(body.subarray(at, at + PIECE_BYTES))) {
        const read = await awaitClientRead(res, 'drain', timeoutMs);
        if (read !== 'taken') return read;
      }
    }
  }
  // A response already ended (a relay that ended it with its last write) is only waited on.
  if (!res.writableEnded) res.end(body && at > 0 ? body.subarray(at) : body);
  else if (res.writableFinished) return 'taken';
  if (res.destroyed) return 'closed';
  // Nothing left in the response or its socket: every byte reached the kernel.
  if (res.writableLength === 0) return 'taken';
  return awaitClientRead(res, 'finish', timeoutMs);
}
