/** What stands in for the gateway's upstream credential in a relayed body. */
export const REDACTED = '[REDACTED]';

/**
 * Shorter secrets are not searched for: a few characters would match ordinary text and mangle it.
 * Real provider keys are far longer.
 */
export const MIN_REDACTED_LENGTH = 8;

/**
 * `bytes` with every occurrence of `secret` (the endpoint's API key, as it would be echoed: raw) replaced
 * by {@link REDACTED}. Returns `bytes` itself when the secret does not occur, which is the common case
 * and costs one search.
 */
export function redactCredential(bytes: Buffer, secret: string | undefined): Buffer {
  if (!secret || secret.length < MIN_REDACTED_LENGTH) return bytes;
  let found = bytes.indexOf(secret);
  if (found === -1) return bytes;
  const needle = Buffer.from(secret);
  const replacement = Buffer.from(REDACTED);
  const parts: Buffer[] = [];
  let from = 0;
  while (found !== -1) {
    parts.push(bytes.subarray(from, found), replacement);
    from = found + needle.length;
    found = bytes.indexOf(needle, from);
  }
  parts.push(bytes.subarray(from));
  return Buffer.concat(parts);
}

/** The same for text (messages built from an upstream body). */
export function redactCredentialText(text: string, secret: string | undefined): string {
  if (!secret || secret.length < MIN_REDACTED_LENGTH) return text;
  return text.split(secret).join(REDACTED);
}
