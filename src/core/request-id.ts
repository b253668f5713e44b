import { randomUUID } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';

const ACCEPTED = /^[A-Za-z0-9._:-]{1,128}$/;

/** The header a request id travels in, from the client, back to it, and to the upstream. */
export const REQUEST_ID_HEADER = 'x-request-id';

/** The client's `x-request-id` when it is 1–128 characters of `[A-Za-z0-9._:-]`, otherwise a fresh UUID. */
export function acceptedRequestId(presented: string | string[] | undefined): string {
  return typeof presented === 'string' && ACCEPTED.test(presented) ? presented : randomUUID();
}

/**
 * Gives a request its id before any route sees it: the accepted or generated id replaces the client's
 * header (so every later reader, the routes included, reads `req.headers['x-request-id']`), and the
 * answer carries it whatever path answers it.
 */
export function stampRequestId(req: IncomingMessage, res: ServerResponse): string {
  const id = acceptedRequestId(req.headers[REQUEST_ID_HEADER]);
  req.headers[REQUEST_ID_HEADER] = id;
  res.setHeader(REQUEST_ID_HEADER, id);
  return id;
}

/** The id {@link stampRequestId} gave the request (empty before it ran, e.g. in unit tests of a bare route). */
export function requestIdOf(req: IncomingMessage): string {
  const id = req.headers[REQUEST_ID_HEADER];
  return typeof id === 'string' ? id : '';
}
