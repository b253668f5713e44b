import { STATUS_CODES } from 'node:http';
import type { ErrorRequestHandler, Request } from 'express';
import type { Logger } from 'pino';
import { errorBody, type ErrorFamily } from '../core/error-body.ts';
import { clientErrorOf, internalError, isGatewayError, type GatewayError } from '../core/gateway-errors.ts';
import { type ClientResponse, bodyStillArriving, lingerAfterAnswer } from './http/client-connection.ts';

/**
 * The one place where errors become HTTP responses. Gateway errors keep their status and detail;
 * anything else is logged and answered with a generic 500, never with a stack trace.
 */
export function errorMiddleware(familyOf: (req: Request) => ErrorFamily, logger: Logger): ErrorRequestHandler {
  return function handleError(cause, req, res, _next) {
    answerError(cause, req.path, res, familyOf(req), logger);
  };
}

/**
 * What {@link errorMiddleware} does with an error, for a request handled outside Express (`path` without the query).
 */
export function answerError(
  cause: unknown,
  path: string,
  res: ClientResponse,
  family: ErrorFamily,
  logger: Logger,
): void {
  const error: GatewayError = isGatewayError(cause) ? cause : (clientErrorOf(cause) ?? internalError(cause));
  if (error.status >= 500 && !error.logged) {
    logger.error({ err: error.cause ?? cause, code: error.code, path }, error.detail);
  }
  if (res.headersSent) {
    // A stream already started: the status cannot change any more, so end the response.
    res.destroy();
    return;
  }
  sendError(res, error, family);
}

export function sendError(res: ClientResponse, error: GatewayError, family: ErrorFamily): void {
  const payload = JSON.stringify(errorBody(error, family));
  res.statusCode = error.status;
  res.setHeader('content-type', 'application/json; charset=utf-8');
  res.setHeader('content-length', Buffer.byteLength(payload));
  for (const [name, value] of Object.entries(error.headers ?? {})) res.setHeader(name, value);
  // Answered before the body was read (a 413, or a 401 on a slow upload): the connection cannot be
  // reused, and is closed without losing the answer.
  const early = bodyStillArriving(res.req);
  if (early) res.setHeader('connection', 'close');
  res.end(payload);
  if (early) lingerAfterAnswer(res.req);
}

/**
 * An error as a whole HTTP/1.1 response that closes its connection, for a socket the HTTP layer never
 * reads (the connection caps refuse before any request is read, so the envelope is the plain one).
 */
export function rawErrorResponse(error: GatewayError): string {
  const payload = JSON.stringify(errorBody(error, 'plain'));
  const headers: Record<string, string> = {
    'Content-Type': 'application/json; charset=utf-8',
    'Content-Length': String(Buffer.byteLength(payload)),
    ...error.headers,
    'X-Content-Type-Options': 'nosniff',
    Connection: 'close',
  };
  return [
    `HTTP/1.1 ${error.status} ${STATUS_CODES[error.status] ?? ''}`,
    ...Object.entries(headers).map(([name, value]) => `${name}: ${value}`),
    '',
    payload,
  ].join('\r\n');
}
