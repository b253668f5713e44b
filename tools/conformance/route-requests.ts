import type { RouteId, UpstreamRouteId, WireFormat } from '../../src/plugins/plugin-contract.ts';

/** The prompt every conformance request sends. */
export const CONFORMANCE_INPUT = 'Conformance check: say hello.';

/**
 * Where an upstream speaking each wire format serves it, relative to the provider's base URL (which
 * carries the version prefix); the mock upstream serves exactly these.
 */
export const STANDARD_PATHS: Readonly<Record<WireFormat, string>> = {
  'chat-completions': '/chat/completions',
  responses: '/responses',
  messages: '/messages',
  'count-tokens': '/messages/count_tokens',
};

/** Routes whose answers can stream. */
export const STREAMING_ROUTES: readonly UpstreamRouteId[] = ['chat-completions', 'messages', 'responses'];

/** A minimal valid client request body for a route, with the given model ID. */
export function clientRequest(route: RouteId, model: string, stream: boolean): Record<string, unknown> {
  const messages = [{ role: 'user', content: CONFORMANCE_INPUT }];
  switch (route) {
    case 'chat':
      return { model, input: CONFORMANCE_INPUT };
    case 'chat-completions':
      return { model, messages, ...(stream ? { stream } : {}) };
    case 'messages':
      return { model, max_tokens: 64, messages, ...(stream ? { stream } : {}) };
    case 'count-tokens':
      return { model, messages };
    case 'responses':
      return { model, input: CONFORMANCE_INPUT, ...(stream ? { stream } : {}) };
  }
}
