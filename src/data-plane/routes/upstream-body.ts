import { badRequest } from '../../core/gateway-errors.ts';
import { JSON_BODY_LIMITS } from '../http/json-body.ts';
import { scanObject, type JsonMember } from '../http/json-scan.ts';

/** Top-level keys the gateway reads itself: sent twice, the gateway and the upstream could read different values. */
const READ_KEYS = ['model', 'stream', 'stream_options'] as const;

/** Throws a 400 naming the first key the gateway reads that the body's top level repeats. */
export function assertReadKeysOnce(members: readonly JsonMember[]): void {
  for (const key of READ_KEYS) {
    if (members.filter((member) => member.key === key).length > 1) {
      throw badRequest(`The body gives '${key}' more than once; send it once`, key);
    }
  }
}

interface Splice {
  readonly start: number;
  readonly end: number;
  readonly text: string;
}

function splice(bytes: Buffer, splices: readonly Splice[]): Buffer {
  const parts: Buffer[] = [];
  let at = 0;
  for (const { start, end, text } of [...splices].sort((a, b) => a.start - b.start)) {
    parts.push(bytes.subarray(at, start), Buffer.from(text, 'utf8'));
    at = end;
  }
  parts.push(bytes.subarray(at));
  return Buffer.concat(parts);
}

const INCLUDE_USAGE = '"include_usage":true';

// `stream_options` made to carry `"include_usage":true`: inserted when absent or null, its other fields kept as sent.
function includeUsage(bytes: Buffer, members: readonly JsonMember[], objectEnd: number): Splice[] {
  const options = members.find((member) => member.key === 'stream_options');
  if (!options) {
    const last = members.at(-1);
    const at = last ? last.valueEnd : objectEnd - 1;
    return [{ start: at, end: at, text: `${last ? ',' : ''}"stream_options":{${INCLUDE_USAGE}}` }];
  }
  if (bytes[options.valueStart] !== 0x7b)
    return [{ start: options.valueStart, end: options.valueEnd, text: `{${INCLUDE_USAGE}}` }];
  const scan = scanObject(bytes, options.valueStart, JSON_BODY_LIMITS);
  // The whole body passed the same scan and JSON.parse, so its parts do too.
  if (scan.kind !== 'object') throw new Error('stream_options could not be located in the request body');
  const flags = scan.members.filter((member) => member.key === 'include_usage');
  if (flags.length) {
    return flags
      .filter((flag) => bytes.toString('latin1', flag.valueStart, flag.valueEnd) !== 'true')
      .map((flag) => ({ start: flag.valueStart, end: flag.valueEnd, text: 'true' }));
  }
  const last = scan.members.at(-1);
  const at = last ? last.valueEnd : options.valueStart + 1;
  return [{ start: at, end: at, text: `${last ? ',' : ''}${INCLUDE_USAGE}` }];
}

/**
 * The body sent upstream: the client's bytes with the top-level `model` value replaced and, when
 * `withIncludeUsage`, `stream_options.include_usage` set to true. Nothing else is touched: numbers,
 * key order, whitespace, escapes and unknown fields reach the upstream exactly as sent.
 *
 * @param members the top-level members of `bytes` (a JSON object that passed `JSON.parse`), each read key given once
 * @param objectEnd one past the top-level closing brace
 */
export function upstreamBody(
  bytes: Buffer,
  members: readonly JsonMember[],
  objectEnd: number,
  changes: { readonly model: string; readonly withIncludeUsage: boolean },
): Buffer {
  const splices: Splice[] = [];
  const model = members.find((member) => member.key === 'model');
  if (model) splices.push({ start: model.valueStart, end: model.valueEnd, text: JSON.stringify(changes.model) });
  if (changes.withIncludeUsage) splices.push(...includeUsage(bytes, members, objectEnd));
  return splice(bytes, splices);
}
