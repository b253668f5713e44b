import { hash } from 'node:crypto';
import type { IncomingHttpHeaders } from 'node:http';

/**
 * A request's conversation as prompt-cache-aware routing knows it: 64 bits of a SHA-256 digest, as two
 * unsigned 32-bit halves. Requests of one session go to the same endpoint of a pool (see
 * `EndpointPool.pick`).
 */
export interface RoutingSession {
  readonly hi: number;
  readonly lo: number;
}

/**
 * Where a session came from, for tests and logs: the header, the body's `prompt_cache_key`, or the prompt's stable
 * prefix.
 */
export type SessionSource = 'header' | 'prompt_cache_key' | 'prefix';

/** The header a client names its session in. */
export const SESSION_HEADER = 'x-session-id';

/**
 * Characters of a long string hashed from each of its ends (with its length): a long system prompt or
 * document costs no more than this, and the first message after a system prompt of any length is
 * still read, so conversations that share a long system prompt remain apart.
 */
export const STRING_SAMPLE = 2048;
/** Characters of the stable prefix hashed at most, whatever its shape. */
export const PREFIX_HASH_BUDGET = 64 * 1024;
// Nesting below this is not read (a parsed body may be nested deeper than the stack allows to walk).
const MAX_DEPTH = 32;

/**
 * The routing session of a request: its `x-session-id` header, else the body's `prompt_cache_key` (a
 * top-level string, as OpenAI takes it), else a hash of the request's stable prefix (`stablePrefix`
 * of its wire format: the system prompt and the first message). A named session (header or
 * `prompt_cache_key`) is hashed from its name alone, so the same name in either place is the same
 * session; `undefined` when the request has none of the three (no prefix).
 *
 * @example
 * requestSession({ 'x-session-id': 'chat-42' }, body, WIRE_FORMATS['chat-completions'].stablePrefix);
 */
export function requestSession(
  headers: IncomingHttpHeaders,
  body: Record<string, unknown>,
  stablePrefix: (body: Record<string, unknown>) => readonly unknown[],
): RoutingSession | undefined {
  return sessionWithSource(headers, body, stablePrefix)?.session;
}

/** {@link requestSession} with where the session came from. */
export function sessionWithSource(
  headers: IncomingHttpHeaders,
  body: Record<string, unknown>,
  stablePrefix: (body: Record<string, unknown>) => readonly unknown[],
): { readonly session: RoutingSession; readonly source: SessionSource } | undefined {
  const header = headers[SESSION_HEADER];
  const named = (Array.isArray(header) ? header[0] : header)?.trim();
  if (named) return { session: namedSession(named), source: 'header' };
  const key = body.prompt_cache_key;
  if (typeof key === 'string' && key !== '') return { session: namedSession(key), source: 'prompt_cache_key' };
  const prefix = stablePrefix(body);
  if (prefix.length === 0) return undefined;
  return { session: prefixSession(prefix), source: 'prefix' };
}

/** The session a client named (`x-session-id`, `prompt_cache_key`). */
export function namedSession(name: string): RoutingSession {
  return digestSession(`id\0${name}`);
}

/**
 * The session of a stable prefix: a hash of its parts (strings, numbers, booleans, null, arrays and
 * objects in their key order). A string longer than twice {@link STRING_SAMPLE} is hashed by its length
 * and both ends; at most {@link PREFIX_HASH_BUDGET} characters in all.
 */
export function prefixSession(parts: readonly unknown[]): RoutingSession {
  const text: string[] = ['prefix\0'];
  write(text, parts, { left: PREFIX_HASH_BUDGET }, 0);
  return digestSession(text.join(''));
}

/** Writes a value with its type and length, so that no two different values write the same text. */
function write(text: string[], value: unknown, budget: { left: number }, depth: number): void {
  if (budget.left <= 0) return;
  budget.left -= 1;
  if (typeof value === 'string') {
    let taken = value.length > 2 * STRING_SAMPLE ? value.slice(0, STRING_SAMPLE) + value.slice(-STRING_SAMPLE) : value;
    if (taken.length > budget.left) taken = taken.slice(0, budget.left);
    budget.left -= taken.length;
    text.push(`s${value.length}:`, taken);
  } else if (Array.isArray(value)) {
    text.push(`[${value.length}`);
    if (depth < MAX_DEPTH) for (const item of value) write(text, item, budget, depth + 1);
    text.push(']');
  } else if (typeof value === 'object' && value !== null) {
    text.push('{');
    if (depth < MAX_DEPTH) {
      for (const key in value) {
        if (!Object.hasOwn(value, key)) continue;
        write(text, key, budget, depth + 1);
        write(text, (value as Record<string, unknown>)[key], budget, depth + 1);
      }
    }
    text.push('}');
  } else {
    text.push(`${typeof value}:${String(value)};`);
  }
}

// One-shot SHA-256 (`crypto.hash`): about half the cost of a `createHash` object for the short texts hashed here.
function digestSession(text: string): RoutingSession {
  const digest = hash('sha256', text, 'buffer');
  return { hi: digest.readUInt32BE(0), lo: digest.readUInt32BE(4) };
}
