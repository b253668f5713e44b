import type { IncomingHttpHeaders } from 'node:http';
import { fieldError, validationError } from './gateway-errors.ts';

/** The header that names a request's end user when its body does not (never forwarded upstream). */
export const END_USER_HEADER = 'x-gateway-end-user';

/** The longest end user accepted, in characters. */
export const MAX_END_USER_LENGTH = 256;

function bodyValue(body: Record<string, unknown>, path: readonly string[]): unknown {
  let value: unknown = body;
  for (const name of path) {
    if (typeof value !== 'object' || value === null || Array.isArray(value)) return undefined;
    value = (value as Record<string, unknown>)[name];
  }
  return value;
}

/**
 * The end user a request names: its body's field at `path` (its route's `endUserField`), else the
 * `x-gateway-end-user` header; the first present one (null counts as absent) must be a non-empty string
 * of at most 256 characters, else a 400 naming it. Undefined when the request names none.
 */
export function endUserOf(
  path: readonly string[] | undefined,
  body: Record<string, unknown>,
  headers: IncomingHttpHeaders,
): string | undefined {
  const fromBody = path && bodyValue(body, path);
  if (fromBody !== undefined && fromBody !== null) return checked(fromBody, path!.join('.'));
  const header = headers[END_USER_HEADER];
  if (header === undefined) return undefined;
  return checked(header, `header ${END_USER_HEADER}`);
}

function checked(value: unknown, field: string): string {
  const problem =
    typeof value !== 'string'
      ? 'must be a string naming the end user (given once)'
      : value.trim() === ''
        ? 'must not be empty'
        : value.length > MAX_END_USER_LENGTH
          ? `must be at most ${MAX_END_USER_LENGTH} characters`
          : undefined;
  if (problem) throw validationError([fieldError(field, problem)], field);
  return value as string;
}
