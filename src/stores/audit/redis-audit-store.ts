import { serviceUnavailable } from '../../core/gateway-errors.ts';
import type { RedisConnection } from '../redis/redis-client.ts';
import { chainedRecord, type AuditEntry, type AuditHead, type AuditRecord, type AuditStore } from './audit-store.ts';

// One hash tag: on a Cluster the log and its head share a slot, so the script never crosses slots.
const LOG = '{gateway-audit}:log';
const HEAD = '{gateway-audit}:head';
// KEYS: log, head; ARGV: the head expected (empty: none yet), the new head, the record. 0 when another writer came
// first.
const APPEND = `local head = redis.call('GET', KEYS[2]) or ''
if head ~= ARGV[1] then return 0 end
redis.call('RPUSH', KEYS[1], ARGV[3])
redis.call('SET', KEYS[2], ARGV[2])
return 1`;
const ATTEMPTS = 50;
const CHUNK = 500;

const headText = (head: AuditHead | undefined) => (head ? `${head.seq} ${head.hash}` : '');
function headOf(text: string | null): AuditHead | undefined {
  if (!text) return undefined;
  const [seq, hash] = text.split(' ');
  return { seq: Number(seq), hash: hash! };
}

/**
 * The audit log on Redis, shared by every instance and the CLI: a list of records (record n at index
 * n - 1) and its head. A record is appended by a script that checks the head it was chained to is
 * still the head, so concurrent writers never fork the chain (the loser chains again onto the winner).
 */
export class RedisAuditStore implements AuditStore {
  constructor(private readonly redis: RedisConnection) {}

  async append(entry: AuditEntry): Promise<AuditRecord> {
    return this.call(async () => {
      for (let attempt = 0; attempt < ATTEMPTS; attempt += 1) {
        const head = headOf(await this.redis.get(HEAD));
        const record = chainedRecord(entry, head);
        const done = await this.redis.eval(
          APPEND,
          2,
          LOG,
          HEAD,
          headText(head),
          headText({ seq: record.seq, hash: record.hash }),
          JSON.stringify(record),
        );
        if (done === 1) return record;
      }
      throw new Error('the audit log changed on every attempt to append to it');
    });
  }

  async all(): Promise<AuditRecord[]> {
    return this.call(async () => (await this.redis.lrange(LOG, 0, -1)).map((line) => JSON.parse(line) as AuditRecord));
  }

  async page(keep: (record: AuditRecord) => boolean, limit: number, before?: number): Promise<AuditRecord[]> {
    return this.call(async () => {
      const length = await this.redis.llen(LOG);
      // Record n is at index n - 1: start just below `before`, read backwards in chunks.
      let end = Math.min(length, before === undefined ? length : before - 1) - 1;
      const found: AuditRecord[] = [];
      while (end >= 0 && found.length < limit) {
        const start = Math.max(0, end - CHUNK + 1);
        const lines = await this.redis.lrange(LOG, start, end);
        for (let index = lines.length - 1; index >= 0 && found.length < limit; index -= 1) {
          const record = JSON.parse(lines[index]!) as AuditRecord;
          if (keep(record)) found.push(record);
        }
        end = start - 1;
      }
      return found;
    });
  }

  async head(): Promise<AuditHead | undefined> {
    return this.call(async () => headOf(await this.redis.get(HEAD)));
  }

  async close(): Promise<void> {}

  private async call<T>(command: () => Promise<T>): Promise<T> {
    try {
      return await command();
    } catch (error) {
      // The message only: an ioredis error object may carry the connection options, password included.
      throw serviceUnavailable(
        'The audit log cannot be reached right now (Redis is unreachable); please retry shortly',
        new Error((error as Error).message),
      );
    }
  }
}
