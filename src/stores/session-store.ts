import { serviceUnavailable } from '../core/gateway-errors.ts';
import type { RedisConnection } from './redis/redis-client.ts';

/** A person signed in through the identity provider: who, and the groups their roles come from. */
export interface SessionUser {
  readonly issuer: string;
  /** The `sub` claim. */
  readonly subject: string;
  readonly name?: string;
  readonly email?: string;
  readonly groups: readonly string[];
}

/** A sign-in under way at the identity provider: what the callback must find again. */
export interface PendingSignOn {
  readonly state: string;
  readonly nonce: string;
  /** The PKCE code verifier. */
  readonly verifier: string;
  readonly redirectUri: string;
}

/** A signed-in account page session, as stored under the hash of its cookie value. */
export interface AccountSession {
  /** Sent back by the page in `x-csrf-token` on every write. */
  readonly csrfToken: string;
  /** Epoch ms after which the session is refused. */
  readonly expiresAt: number;
  /** Signed in through the identity provider; absent: with the admin token. */
  readonly user?: SessionUser;
  /** Not a session: a sign-in under way (kept under its own cookie until the identity provider answers). */
  readonly pending?: PendingSignOn;
}

/**
 * Where account page sessions live, keyed by the SHA-256 of the cookie value (a copy of the store
 * holds no usable cookie). Entries expire by themselves at `expiresAt`.
 */
export interface SessionStore {
  put(hash: string, session: AccountSession): Promise<void>;
  get(hash: string): Promise<AccountSession | undefined>;
  delete(hash: string): Promise<void>;
}

/** Sessions of this process only: with several instances, a session works only on the one that made it. */
export class MemorySessionStore implements SessionStore {
  private readonly sessions = new Map<string, AccountSession>();

  constructor(private readonly now: () => number = Date.now) {}

  async put(hash: string, session: AccountSession): Promise<void> {
    const now = this.now();
    for (const [key, stored] of this.sessions) if (stored.expiresAt <= now) this.sessions.delete(key);
    this.sessions.set(hash, session);
  }

  async get(hash: string): Promise<AccountSession | undefined> {
    const session = this.sessions.get(hash);
    if (session && session.expiresAt <= this.now()) {
      this.sessions.delete(hash);
      return undefined;
    }
    return session;
  }

  async delete(hash: string): Promise<void> {
    this.sessions.delete(hash);
  }
}

const UNREACHABLE = 'Account sessions cannot be read right now (Redis is unreachable); please retry shortly';

/**
 * Sessions shared by every gateway process through Redis (`gw-account-session:<hash>`, expiring with
 * the session). While Redis is away sign-in and signed-in requests answer 503.
 */
export class RedisSessionStore implements SessionStore {
  constructor(
    private readonly redis: RedisConnection,
    private readonly prefix = 'gw-account-session:',
    private readonly now: () => number = Date.now,
  ) {}

  async put(hash: string, session: AccountSession): Promise<void> {
    const ttlMs = Math.max(1, session.expiresAt - this.now());
    await this.call(() => this.redis.set(this.prefix + hash, JSON.stringify(session), 'PX', ttlMs));
  }

  async get(hash: string): Promise<AccountSession | undefined> {
    const text = await this.call(() => this.redis.get(this.prefix + hash));
    if (!text) return undefined;
    const session = JSON.parse(text) as AccountSession;
    return session.expiresAt > this.now() ? session : undefined;
  }

  async delete(hash: string): Promise<void> {
    await this.call(() => this.redis.del(this.prefix + hash));
  }

  private async call<T>(command: () => Promise<T>): Promise<T> {
    try {
      return await command();
    } catch (error) {
      throw serviceUnavailable(UNREACHABLE, error);
    }
  }
}
