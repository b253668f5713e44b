import { request } from '../core/undici-agent.ts';
import type { Phases, WebhookGuardrail, WebhookVerdict } from './guardrail.ts';
import type { WebhookSettings } from './guardrail-settings.ts';

/** Largest answer a webhook may give, in bytes: anything longer is not a usable answer. */
export const MAX_WEBHOOK_ANSWER_BYTES = 4 * 1024 * 1024;

/** One POST to a webhook: its status and body, or a throw (unreachable, timed out, answer too large). */
export type WebhookPost = (
  url: string,
  body: string,
  headers: Readonly<Record<string, string>>,
  timeoutMs: number,
) => Promise<{ readonly status: number; readonly body: string }>;

/** The default {@link WebhookPost}: undici, the whole exchange (headers and body) bounded by the timeout. */
export const postWebhook: WebhookPost = async (url, body, headers, timeoutMs) => {
  const response = await request(url, {
    method: 'POST',
    body,
    headers: { ...headers, 'content-type': 'application/json' },
    signal: AbortSignal.timeout(timeoutMs),
  });
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of response.body) {
    size += (chunk as Buffer).length;
    if (size > MAX_WEBHOOK_ANSWER_BYTES) {
      response.body.destroy();
      throw new Error(`the answer is larger than ${MAX_WEBHOOK_ANSWER_BYTES} bytes`);
    }
    chunks.push(chunk as Buffer);
  }
  return { status: response.statusCode, body: Buffer.concat(chunks).toString('utf8') };
};

/** The verdict in a webhook's answer, or why it is not a usable one. */
export function readVerdict(status: number, body: string, sent: number): WebhookVerdict {
  if (status < 200 || status >= 300) return { kind: 'unavailable', reason: `answered ${status}` };
  let answer: unknown;
  try {
    answer = JSON.parse(body);
  } catch {
    return { kind: 'unavailable', reason: 'answered with something that is not JSON' };
  }
  const { action, texts } = (answer ?? {}) as { action?: unknown; texts?: unknown };
  if (action === 'allow') return { kind: 'allow' };
  if (action === 'block') return { kind: 'block' };
  if (action === 'rewrite') {
    if (Array.isArray(texts) && texts.length === sent && texts.every((text) => typeof text === 'string'))
      return { kind: 'rewrite', texts: texts as string[] };
    return {
      kind: 'unavailable',
      reason: `answered rewrite without texts: a list of ${sent} string(s), one for each text sent`,
    };
  }
  return { kind: 'unavailable', reason: "answered without an action ('allow', 'block' or 'rewrite')" };
}

/**
 * The `webhook` guardrail: POSTs the texts of a request or answer with their context as JSON,
 * `{"guardrail", "phase", "texts": [...], "context": {"route", "model", "key_id", "team", "request_id", "stream",
 * "preceding"?}}`, and takes `{"action": "allow"}`, `{"action": "block"}` or `{"action": "rewrite", "texts": [...]}`. A
 * call that fails, answers anything else or takes longer than `timeoutMs` is `unavailable`: the route follows the
 * entry's `failMode`.
 */
export function webhookGuardrail(
  settings: WebhookSettings,
  phases: Phases,
  post: WebhookPost = postWebhook,
): WebhookGuardrail {
  return {
    kind: 'webhook',
    name: settings.name,
    phases,
    failMode: settings.failMode,
    async check(texts, context) {
      const payload = JSON.stringify({
        guardrail: settings.name,
        phase: context.phase,
        texts,
        context: {
          route: context.route,
          model: context.model,
          key_id: context.keyId ?? null,
          team: context.team ?? null,
          request_id: context.requestId ?? null,
          stream: context.stream,
          ...(context.preceding ? { preceding: context.preceding } : {}),
        },
      });
      try {
        const answer = await post(settings.url, payload, settings.headers, settings.timeoutMs);
        return readVerdict(answer.status, answer.body, texts.length);
      } catch (error) {
        const name = (error as { name?: string } | null)?.name;
        return {
          kind: 'unavailable',
          reason:
            name === 'TimeoutError' || name === 'AbortError'
              ? `no answer within ${settings.timeoutMs} ms`
              : 'could not be reached',
        };
      }
    },
  };
}
