import { badRequest, invalidJson, type GatewayError } from '../../core/gateway-errors.ts';
import { JSON_BODY_LIMITS, parseJsonRequestBody, scanObject, type JsonMember } from '../http/json-body.ts';

/** What a client's message on a Responses WebSocket asks for. */
export type ClientMessage =
  /** A response: `body` is its Responses request, as `POST /v1/responses` with `stream: true` takes it. */
  | { readonly type: 'response.create'; readonly body: Buffer }
  /** Cancel the response in flight (the one named, when `responseId` is given). */
  | { readonly type: 'response.cancel'; readonly responseId: string | undefined }
  /** Not a message the socket takes: the error the client is told. */
  | { readonly type: 'invalid'; readonly error: GatewayError };

/**
 * Fields that choose the transport over HTTP; a socket's responses are always streamed as its messages,
 * so they are dropped from the request (the wire protocol says they are not used).
 */
const TRANSPORT_FIELDS = new Set(['type', 'stream', 'background']);

const STREAMED = Buffer.from('{"stream":true');
const CLOSE = Buffer.from('}');
const COMMA = Buffer.from(',');

/**
 * Reads one message: a JSON object whose `type` is `response.create` (the rest of the object is a
 * Responses create body) or `response.cancel`. The body is made by splicing the message's own bytes,
 * so that everything the client sent reaches the upstream as sent: `"stream":true` first, then every
 * member but the transport's. The request's own checks (UTF-8, bounds, JSON, the schema) run on it
 * later, as on any request; only what is needed to tell the message's type is read here.
 */
export function readClientMessage(data: Buffer): ClientMessage {
  let start = 0;
  while (start < data.length && isSpace(data[start]!)) start += 1;
  const scan = scanObject(data, start, JSON_BODY_LIMITS);
  if (scan.kind !== 'object') return { type: 'invalid', error: notAnObject(data) };
  const typed = scan.members.filter((member) => member.key === 'type');
  if (typed.length !== 1) {
    return { type: 'invalid', error: typeError(typed.length === 0 ? 'is missing' : 'is given more than once') };
  }
  const type = valueOf(data, typed[0]!);
  if (type === 'response.create') return create(data, start, scan.members);
  if (type === 'response.cancel') return cancel(data, scan.members);
  const problem = typeof type === 'string' ? `'${type.slice(0, 64)}' is not one this socket takes` : 'must be a string';
  return { type: 'invalid', error: typeError(problem) };
}

function create(data: Buffer, open: number, members: readonly JsonMember[]): ClientMessage {
  const generate = members.find((member) => member.key === 'generate');
  // A warm-up leaves no response a later turn could continue from through the gateway: refused rather than faked.
  if (generate && valueOf(data, generate) === false) {
    const detail = "'generate: false' (a warm-up without a response) is not supported; send the turn itself";
    return { type: 'invalid', error: badRequest(detail, 'generate') };
  }
  // Member `i` runs from the end of the one before it (its comma included) to the end of its value.
  const parts: Buffer[] = [STREAMED];
  members.forEach((member, index) => {
    if (TRANSPORT_FIELDS.has(member.key) || (member === generate && valueOf(data, member) === true)) return;
    if (index === 0) parts.push(COMMA);
    parts.push(data.subarray(index === 0 ? open + 1 : members[index - 1]!.valueEnd, member.valueEnd));
  });
  parts.push(CLOSE);
  return { type: 'response.create', body: Buffer.concat(parts) };
}

function cancel(data: Buffer, members: readonly JsonMember[]): ClientMessage {
  const named = members.find((member) => member.key === 'response_id');
  const responseId = named === undefined ? undefined : valueOf(data, named);
  if (responseId !== undefined && responseId !== null && typeof responseId !== 'string') {
    return { type: 'invalid', error: badRequest("'response_id' must be a string", 'response_id') };
  }
  return { type: 'response.cancel', responseId: responseId ?? undefined };
}

/** A member's value, or undefined when it does not parse (the request's own parse names the fault). */
function valueOf(data: Buffer, member: JsonMember): unknown {
  try {
    return JSON.parse(data.toString('utf8', member.valueStart, member.valueEnd));
  } catch {
    return undefined;
  }
}

/** The request parse's own words for a message that is not one JSON object. */
function notAnObject(data: Buffer): GatewayError {
  try {
    parseJsonRequestBody(data);
  } catch (error) {
    return error as GatewayError;
  }
  return invalidJson('A message must be a JSON object');
}

function typeError(problem: string): GatewayError {
  return badRequest(`The message's 'type' ${problem}: send 'response.create' or 'response.cancel'`, 'type');
}

const isSpace = (byte: number) => byte === 0x20 || byte === 0x0a || byte === 0x0d || byte === 0x09;
