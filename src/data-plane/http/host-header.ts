import type { IncomingMessage } from 'node:http';
import { badRequest, type GatewayError } from '../../core/gateway-errors.ts';

/**
 * The 400 for a request with more than one Host header, else undefined. Node keeps the first and drops
 * the others, while a proxy in front or behind may go by another: such a request means two things.
 */
export function duplicateHost(req: IncomingMessage): GatewayError | undefined {
  const raw = req.rawHeaders;
  let seen = false;
  for (let index = 0; index < raw.length; index += 2) {
    const name = raw[index]!;
    if (name.length === 4 && name.toLowerCase() === 'host') {
      if (seen) return badRequest('The request has more than one Host header');
      seen = true;
    }
  }
  return undefined;
}
