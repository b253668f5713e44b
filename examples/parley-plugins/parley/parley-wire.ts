import type { TokenUsage, UsageExtractor } from 'model-gateway/plugin';

/**
 * Parley's own wire format (the vendor's API, not the gateway's):
 *
 *   POST /v2/generate   Authorization: Token <key>
 *   {"engine": "quill-2", "dialog": [{"from": "system" | "human" | "assistant", "say": "…"}],
 *    "limits": {"max_words": 120}, "stream": true}
 *
 * answers `{"reply": {"say": "…"}, "tally": {"prompt": 12, "reply": 7}}`, or, with `"stream": true`,
 * `event: chunk` events `{"say": "…"}` closed by one `event: end` `{"tally": {…}}`. Errors come with
 * their status as `{"fault": {"kind": "overloaded", "text": "…"}}`, and in a stream as `event: fault`.
 */
export interface ParleyTurn {
  readonly from: 'system' | 'human' | 'assistant';
  readonly say: string;
}

export interface ParleyRequest {
  readonly engine: string;
  readonly dialog: readonly ParleyTurn[];
  readonly limits?: { readonly max_words: number };
  readonly stream?: true;
}

export interface ParleyTally {
  readonly prompt: number;
  readonly reply: number;
}

export interface ParleyFault {
  readonly kind?: string;
  readonly text?: string;
}

const isRecord = (value: unknown): value is Record<string, unknown> =>
  typeof value === 'object' && value !== null && !Array.isArray(value);
const isCount = (value: unknown): value is number => typeof value === 'number' && Number.isFinite(value) && value >= 0;

/** A tally as the gateway's usage: Parley has no prompt cache, so nothing is cached. */
export function usageOfTally(tally: unknown): TokenUsage | undefined {
  if (!isRecord(tally) || !isCount(tally.prompt) || !isCount(tally.reply)) return undefined;
  return { inputTokens: tally.prompt, outputTokens: tally.reply, cachedTokens: 0 };
}

/** The JSON of an event's data, or undefined when it is none. */
export function dataOf(data: string): Record<string, unknown> | undefined {
  try {
    const value: unknown = JSON.parse(data);
    return isRecord(value) ? value : undefined;
  } catch {
    return undefined;
  }
}

/** The reply text of a JSON answer. */
export function replyOf(body: unknown): string | undefined {
  const reply = isRecord(body) && isRecord(body.reply) ? body.reply.say : undefined;
  return typeof reply === 'string' ? reply : undefined;
}

/** The fault of an error answer (or of a stream's `fault` event). */
export function faultOf(body: unknown): ParleyFault | undefined {
  const fault = isRecord(body) ? (isRecord(body.fault) ? body.fault : body) : undefined;
  if (!fault || (typeof fault.text !== 'string' && typeof fault.kind !== 'string')) return undefined;
  const text = (value: unknown) => (typeof value === 'string' ? value : undefined);
  return { kind: text(fault.kind), text: text(fault.text) };
}

/** Parley's usage, from its tally: the whole answer's, or the `end` event's. */
export const parleyUsage: UsageExtractor = {
  fromBody: (body) => (isRecord(body) ? usageOfTally(body.tally) : undefined),
  fromStreamEvent: (seen, event) => {
    if (event.event !== 'end') return seen;
    return usageOfTally(dataOf(event.data)?.tally) ?? seen;
  },
};
