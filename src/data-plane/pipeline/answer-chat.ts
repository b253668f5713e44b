import type { UsageAccounting } from '../../core/exchange.ts';
import { guardChatPayload } from '../guardrails/answer-guard.ts';
import { endForClient } from '../http/client-connection.ts';
import { chatResult } from '../routes/native-chat-upstream.ts';
import type { Stage } from './exchange.ts';

/**
 * What the native chat's answer stage uses: usage accounting (the extractor and the charge it shows), the client write
 * bound.
 */
export interface ChatAnswerParts {
  readonly usage: UsageAccounting;
  readonly clientWriteTimeoutMs: number;
}

/**
 * The answer stage of `POST /v1/chat`: the gateway's own JSON from the upstream's answer (its text, the
 * usage with charged tokens), through the response guardrails, then written whole.
 */
export function answerChat(parts: ChatAnswerParts): Stage {
  return async function answer(exchange) {
    const { call, body, apiKey } = exchange.chat!;
    const { payload: unguarded, usage } = chatResult(parts.usage, call, exchange.model!, body, apiKey, exchange);
    // Response guardrails on the answer's text: a block ends the exchange (billed as the upstream billed it) and is
    // thrown.
    const answering = guardChatPayload(exchange, unguarded, usage);
    const payload = answering instanceof Promise ? await answering : answering;
    exchange.firstByteAt = performance.now();
    exchange.res.writeHead(200, {
      'content-type': 'application/json; charset=utf-8',
      'content-length': payload.length,
    });
    exchange.endAsRead(await endForClient(exchange.res, payload, parts.clientWriteTimeoutMs), 200, usage, true);
  };
}
