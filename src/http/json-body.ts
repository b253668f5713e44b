import type { IncomingMessage } from 'node:http';
import { invalidJson, payloadTooLarge } from '../errors/gateway-errors.ts';
import { readLimited } from './read-limited.ts';

/**
 * Reads a request body once, up to `limitBytes`, and parses it as one JSON object. Any content type is
 * read as JSON (`curl -d` sends a form type); a declared length over the limit is refused before
 * reading.
 */
export async function readJsonObject(req: IncomingMessage, limitBytes: number): Promise<Record<string, unknown>> {
  const declared = Number(req.headers['content-length']);
  if (declared > limitBytes) throw payloadTooLarge(limitBytes);
  const text = (await readLimited(req, limitBytes, () => payloadTooLarge(limitBytes))).toString('utf8');
  if (text.trim() === '') throw invalidJson('Request body is empty; send a JSON object');
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (error) {
    throw invalidJson(`Request body is not valid JSON: ${(error as Error).message}`);
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw invalidJson(`Request body must be a JSON object, got ${value === null ? 'null' : Array.isArray(value) ? 'an array' : typeof value}`);
  }
  return value as Record<string, unknown>;
}
