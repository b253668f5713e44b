import { createHmac, timingSafeEqual } from 'node:crypto';

/** The headers a signed alert webhook carries. */
export const DELIVERY_HEADER = 'x-gateway-delivery';
export const TIMESTAMP_HEADER = 'x-gateway-timestamp';
export const SIGNATURE_HEADER = 'x-gateway-signature';

/** `sha256=<hex HMAC-SHA256(secret, "<timestamp>.<body>")>`: the timestamp is signed with the body against replay. */
export function signWebhook(secret: string, timestamp: number, body: string): string {
  return `sha256=${createHmac('sha256', secret).update(`${timestamp}.${body}`).digest('hex')}`;
}

/**
 * What a receiver checks: the signature is the body's under the secret and the timestamp, compared in
 * constant time, and the timestamp is within `toleranceS` of `nowS` (unix seconds).
 */
export function verifyWebhook(
  secret: string,
  headers: { readonly timestamp: string | undefined; readonly signature: string | undefined },
  body: string,
  nowS: number,
  toleranceS = 300,
): boolean {
  const timestamp = Number(headers.timestamp);
  if (!/^\d{1,12}$/.test(headers.timestamp ?? '') || Math.abs(nowS - timestamp) > toleranceS) return false;
  const expected = Buffer.from(signWebhook(secret, timestamp, body));
  const given = Buffer.from(headers.signature ?? '');
  return given.length === expected.length && timingSafeEqual(given, expected);
}

/** The wait before attempt `attempt + 1` (1: the first retry): `base` doubled each time, at most `max`. */
export function backoffMs(attempt: number, base: number, max: number): number {
  return Math.min(max, base * 2 ** Math.max(0, attempt - 1));
}
