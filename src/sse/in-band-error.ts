import { errorBody } from '../errors/error-body.ts';
import type { GatewayError } from '../errors/gateway-errors.ts';
import type { WireFormat } from '../plugins/plugin-contract.ts';

/**
 * One SSE event that reports a gateway error inside a stream whose status line is already sent, in the
 * stream's own wire format, so that each official SDK raises it as an API error:
 * - Chat Completions: `data: {"error":{message,type,param,code}}` (openai-node throws on a chunk with a
 *   top-level `error`);
 * - Messages: `event: error` + `{"type":"error","error":{type,message}}` (as Anthropic sends mid-stream);
 * - Responses: `event: error` + `{"type":"error","code","message","param"}`, the Responses error event,
 *   also carrying `error:{…}` so that openai-node throws it rather than yielding it.
 * Each also carries the gateway's `detail`. The caller ends the stream after writing it.
 */
export function inBandError(format: WireFormat, error: GatewayError): Buffer {
  if (format === 'messages') return sseEvent('error', errorBody(error, 'messages-envelope'));
  const completions = errorBody(error, 'completions-envelope') as { detail: string; error: { message: string; param: unknown; code: string } };
  if (format === 'responses') {
    const { message, param, code } = completions.error;
    return sseEvent('error', { type: 'error', code, message, param, ...completions });
  }
  return sseEvent(undefined, completions);
}

function sseEvent(name: string | undefined, payload: unknown): Buffer {
  // JSON.stringify never emits a raw line break, so the payload is one `data:` line.
  return Buffer.from(`${name ? `event: ${name}\n` : ''}data: ${JSON.stringify(payload)}\n\n`, 'utf8');
}
