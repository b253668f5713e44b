/** Helpers the wire format modules share for reading event data and usage counts. */

export type Json = Record<string, any>;

export const isObject = (value: unknown): value is Record<string, unknown> =>
  typeof value === 'object' && value !== null;

/** The JSON object (or array) in `data`, or `undefined` when it is not JSON or not an object. */
export function parseObject(data: string): Json | undefined {
  try {
    const value: unknown = JSON.parse(data);
    return isObject(value) ? (value as Json) : undefined;
  } catch {
    return undefined;
  }
}

/** A token count as recorded: a finite positive number, rounded; anything else is 0. */
export const count = (value: unknown): number =>
  typeof value === 'number' && Number.isFinite(value) && value > 0 ? Math.round(value) : 0;

/** A string value, or `''`. */
export const text = (value: unknown): string => (typeof value === 'string' ? value : '');

/**
 * Whether JSON text has a `"usage"` key whose value is an object: a cheap scan, so that the chunks
 * of a stream without usage (`"usage":null`, or none at all) are never parsed.
 */
export function hasUsageObject(data: string): boolean {
  for (let at = data.indexOf('"usage"'); at !== -1; at = data.indexOf('"usage"', at + 7)) {
    let index = at + 7;
    while (isBlank(data.charCodeAt(index))) index += 1;
    if (data.charCodeAt(index) !== 0x3a /* : */) continue;
    index += 1;
    while (isBlank(data.charCodeAt(index))) index += 1;
    if (data.charCodeAt(index) === 0x7b /* { */) return true;
  }
  return false;
}

const isBlank = (code: number): boolean => code === 0x20 || code === 0x0a || code === 0x0d || code === 0x09;

/** One SSE event, optionally named; JSON.stringify never emits a raw line break, so the payload is one `data:` line. */
export function sseEvent(name: string | undefined, payload: unknown): Buffer {
  return Buffer.from(`${name ? `event: ${name}\n` : ''}data: ${JSON.stringify(payload)}\n\n`, 'utf8');
}
