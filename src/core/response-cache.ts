import type { TokenUsage } from '../plugins/plugin-contract.ts';

/**
 * One stored answer: the bytes a client received for a complete 200 (a JSON body, or a whole SSE
 * stream after the plugin's fixups), with what a hit needs to answer and to be recorded.
 */
export interface CachedAnswer {
  /** When it was stored (epoch ms): a hit's `Age`. */
  readonly storedAt: number;
  readonly status: number;
  readonly contentType: string;
  readonly stream: boolean;
  /** The canonical model that served it (a fallback's, when the requested model's endpoints failed). */
  readonly model: string;
  /** The token counts the upstream reported for it. */
  readonly usage: TokenUsage;
  readonly body: Buffer;
}

/**
 * Whose entries: the caller's team (by its id, so a later team of the same name never reads them), else
 * the caller's key (entries are never shared across tenants).
 */
export type CacheTenant = `team:${string}` | `key:${string}`;

/** The tenant of a caller: its team's (by the team's id) when it has one, else its own key's. */
export function cacheTenant(keyId: string, teamId: string | undefined): CacheTenant {
  return teamId === undefined ? `key:${keyId}` : `team:${teamId}`;
}

/** Figures of the cache's own activity, for metrics. */
export interface CacheEvents {
  /** An entry was written: its size in bytes. */
  stored?(bytes: number): void;
  /** Entries were dropped to stay within the byte bound (the embedded store): their size in bytes. */
  evicted?(bytes: number): void;
}

/**
 * Exact response cache entries, per tenant. `key` is a SHA-256 hex digest of everything that can change
 * an answer (see `data-plane/cache/cache-key.ts`); the store never sees a caller's credential. Entries
 * expire `ttlMs` after they were stored.
 */
export interface ResponseCache {
  /** The entry, or undefined (none, expired, or the store could not answer in time: a miss, never an error). */
  get(tenant: CacheTenant, key: string): Promise<CachedAnswer | undefined> | CachedAnswer | undefined;
  /** Stores an entry for `ttlMs` (fire and forget: a store that fails logs and drops it). */
  set(tenant: CacheTenant, key: string, answer: CachedAnswer, ttlMs: number): void;
  /** Drops one entry (fire and forget, like {@link set}). */
  delete(tenant: CacheTenant, key: string): void;
  /** Drops every entry, or one tenant's; resolves with how many were dropped. */
  clear(tenant?: CacheTenant): Promise<number>;
  close(): Promise<void>;
}

// The stored form: a 4-byte length, the JSON head, then the body bytes as they were sent.
interface StoredHead {
  readonly t: number;
  readonly s: number;
  readonly c: string;
  readonly x: boolean;
  readonly m: string;
  readonly u: readonly [number, number, number];
}

/** One entry as the stores keep it (a Redis string, or a Buffer in memory). */
export function encodeCachedAnswer(answer: CachedAnswer): Buffer {
  const { usage } = answer;
  const head: StoredHead = {
    t: answer.storedAt,
    s: answer.status,
    c: answer.contentType,
    x: answer.stream,
    m: answer.model,
    u: [usage.inputTokens, usage.outputTokens, usage.cachedTokens],
  };
  const headBytes = Buffer.from(JSON.stringify(head), 'utf8');
  const out = Buffer.allocUnsafe(4 + headBytes.length + answer.body.length);
  out.writeUInt32BE(headBytes.length, 0);
  headBytes.copy(out, 4);
  answer.body.copy(out, 4 + headBytes.length);
  return out;
}

/** The entry {@link encodeCachedAnswer} wrote, or undefined when `stored` is not one (a foreign or damaged value). */
export function decodeCachedAnswer(stored: Buffer): CachedAnswer | undefined {
  if (stored.length < 4) return undefined;
  const headLength = stored.readUInt32BE(0);
  if (4 + headLength > stored.length) return undefined;
  try {
    const head = JSON.parse(stored.toString('utf8', 4, 4 + headLength)) as StoredHead;
    if (
      typeof head.t !== 'number' ||
      typeof head.s !== 'number' ||
      typeof head.c !== 'string' ||
      typeof head.m !== 'string' ||
      !Array.isArray(head.u)
    )
      return undefined;
    return {
      storedAt: head.t,
      status: head.s,
      contentType: head.c,
      stream: head.x === true,
      model: head.m,
      usage: {
        inputTokens: Number(head.u[0]) || 0,
        outputTokens: Number(head.u[1]) || 0,
        cachedTokens: Number(head.u[2]) || 0,
      },
      body: stored.subarray(4 + headLength),
    };
  } catch {
    return undefined;
  }
}
