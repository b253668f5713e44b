import { isUtf8 } from 'node:buffer';
import type { IncomingMessage } from 'node:http';
import { badRequest, fieldError, invalidJson, payloadTooLarge, validationError } from '../../core/gateway-errors.ts';
import { scanObject, type JsonLimits, type JsonMember } from './json-scan.ts';
import { readLimited } from './read-limited.ts';

/**
 * Bounds on every JSON request body, checked in one linear pass before the body is parsed or walked:
 * deeper nesting or more elements than any real request carries are refused with a 400 naming the
 * limit, so that no recursive walk (validation, estimates) can overflow the stack or run for seconds.
 */
export const JSON_BODY_LIMITS: JsonLimits = { maxDepth: 256, maxElements: 1_000_000 };

/** A request body as received, parsed, and where each top-level member's value sits in the bytes. */
export interface JsonRequestBody {
  readonly bytes: Buffer;
  readonly body: Record<string, unknown>;
  /** The top-level members in the order sent, repeated keys included (`JSON.parse` keeps the last). */
  readonly members: readonly JsonMember[];
  /** One past the top-level closing brace. */
  readonly end: number;
}

function describe(value: unknown): string {
  return value === null ? 'null' : Array.isArray(value) ? 'an array' : typeof value;
}

/**
 * Reads a request body once, up to `limitBytes`, checks that it is UTF-8 and within the
 * {@link JSON_BODY_LIMITS}, and parses it as one JSON object. Any content type is read as JSON
 * (`curl -d` sends a form type); a declared length over the limit is refused before reading.
 */
export async function readJsonRequestBody(
  req: IncomingMessage,
  limitBytes: number,
  limits: JsonLimits = JSON_BODY_LIMITS,
): Promise<JsonRequestBody> {
  const declared = Number(req.headers['content-length']);
  if (declared > limitBytes) throw payloadTooLarge(limitBytes);
  const bytes = await readLimited(req, limitBytes, () => payloadTooLarge(limitBytes));
  return parseJsonRequestBody(bytes, limits);
}

/** The checks and parse of {@link readJsonRequestBody}, for a body that came whole (a WebSocket message). */
export function parseJsonRequestBody(bytes: Buffer, limits: JsonLimits = JSON_BODY_LIMITS): JsonRequestBody {
  // Decoding turns bad bytes into U+FFFD while the raw bytes go upstream, which may read them otherwise
  // (`"model\xff"` as a second `"model"`, say): what the gateway checked would not be what it sent.
  if (!isUtf8(bytes)) throw validationError([fieldError('body', 'not valid UTF-8')]);
  const scan = scanObject(bytes, 0, limits);
  if (scan.kind === 'too-deep') {
    throw badRequest(`Request body is nested deeper than the limit of ${limits.maxDepth} levels of objects and arrays`);
  }
  if (scan.kind === 'too-many-elements') {
    throw badRequest(`Request body holds more than the limit of ${limits.maxElements} array items and object members`);
  }
  const text = bytes.toString('utf8');
  if (text.trim() === '') throw invalidJson('Request body is empty; send a JSON object');
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (error) {
    throw invalidJson(`Request body is not valid JSON: ${(error as Error).message}`);
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw invalidJson(`Request body must be a JSON object, got ${describe(value)}`);
  }
  // Valid JSON the scan did not read as an object cannot happen; refuse rather than forward a body misread.
  if (scan.kind !== 'object') throw invalidJson('Request body could not be read as a JSON object');
  return { bytes, body: value as Record<string, unknown>, members: scan.members, end: scan.end };
}

/** {@link readJsonRequestBody} for routes that only need the parsed object. */
export async function readJsonObject(req: IncomingMessage, limitBytes: number): Promise<Record<string, unknown>> {
  return (await readJsonRequestBody(req, limitBytes)).body;
}
