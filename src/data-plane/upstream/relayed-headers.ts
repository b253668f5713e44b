import type { Dispatcher } from 'undici';
import { redactCredentialText } from './redact-credential.ts';
import { RELAYED_RESPONSE_HEADERS } from './upstream-client.ts';

/** The upstream headers passed on, each value with the endpoint's credential redacted. */
export function relayedHeaders(
  upstreamHeaders: Dispatcher.ResponseData['headers'],
  apiKey: string | undefined,
): Record<string, string> {
  const headers: Record<string, string> = {};
  for (const name of RELAYED_RESPONSE_HEADERS) {
    const value = upstreamHeaders[name];
    // The gateway's own request id answers the client; the upstream's stays visible beside it.
    if (typeof value === 'string')
      headers[name === 'x-request-id' ? 'x-upstream-request-id' : name] = redactCredentialText(value, apiKey);
  }
  return headers;
}
