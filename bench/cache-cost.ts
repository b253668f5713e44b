import {
  AnswerCapture,
  forwardedHeaderValues,
  hitHeaders,
  lookUp,
  openTicket,
  type ResponseCaching,
} from '../src/data-plane/cache/response-caching.ts';
import { MemoryResponseCache } from '../src/stores/cache/memory-response-cache.ts';

/**
 * The response cache's own stage, in process, on the embedded store: per miss, the ticket (the key's
 * SHA-256 over the forwarded bytes), the lookup that finds nothing, the capture and the store of the
 * answer (the cache kept full, so every store also evicts); per hit, the ticket, the lookup that finds
 * the entry and the hit's head. CPU µs per request, median of rounds: what end-to-end runs bury in the
 * machine's noise, and what the end-to-end figure adds to it is the garbage collector's work on the
 * entries held.
 */
export async function cacheCost(
  rounds = 7,
  perRound = 50_000,
  maxBytes = 64 * 1024 * 1024,
): Promise<{ miss: number; hit: number }> {
  const caching: ResponseCaching = {
    store: new MemoryResponseCache({ current: maxBytes }),
    settings: { ttlMs: 3_600_000, maxEntryBytes: 1024 * 1024 },
  };
  const route = {
    format: 'chat-completions',
    path: '/chat/completions',
    forwardHeaders: [],
    defaultHeaders: {},
  } as never;
  const caller = { id: 'static_0123456789abcdef' };
  const headers = {};
  const res = { setHeader: () => res } as unknown as Pick<import('node:http').ServerResponse, 'setHeader'>;
  const answer = Buffer.from(
    JSON.stringify({
      id: 'chatcmpl-1',
      object: 'chat.completion',
      created: 1,
      model: 'delta-4.7',
      choices: [
        {
          index: 0,
          message: {
            role: 'assistant',
            content: 'A benchmark answer of a realistic length for a short chat turn, with some words.',
          },
          finish_reason: 'stop',
        },
      ],
      usage: { prompt_tokens: 21, completion_tokens: 17, total_tokens: 38 },
    }),
  );
  const usage = { inputTokens: 21, outputTokens: 17, cachedTokens: 0 };
  let serial = 0;
  const body = (index: number) =>
    Buffer.from(
      `{"model":"delta-4.7","messages":[{"role":"user","content":"Benchmark message of a realistic length for a chat turn."}],"user":"bench-${index}"}`,
    );
  const miss = async () => {
    const forwarded = body((serial += 1));
    const ticket = openTicket(
      caching,
      caller,
      headers,
      res,
      (bytes: Buffer) => ({
        route: 'chat-completions',
        model: 'delta/delta-4.7',
        forwarded: bytes,
        headers: forwardedHeaderValues(route, headers),
      }),
      forwarded,
    )!;
    if (await lookUp(caching, ticket, res)) throw new Error('a miss found an entry');
    const capture = new AnswerCapture(ticket, caching);
    capture.add(answer);
    capture.store({ contentType: 'application/json', stream: false, model: 'delta/delta-4.7', usage });
  };
  const fixed = body(-1);
  const hit = async () => {
    const ticket = openTicket(
      caching,
      caller,
      headers,
      res,
      (bytes: Buffer) => ({
        route: 'chat-completions',
        model: 'delta/delta-4.7',
        forwarded: bytes,
        headers: forwardedHeaderValues(route, headers),
      }),
      fixed,
    )!;
    const found = await lookUp(caching, ticket, res);
    if (!found) throw new Error('a hit found nothing');
    hitHeaders(found, Date.now());
  };
  const measure = async (one: () => Promise<void>) => {
    const start = process.cpuUsage();
    for (let index = 0; index < perRound; index += 1) await one();
    const spent = process.cpuUsage(start);
    return (spent.user + spent.system) / perRound;
  };
  // Fill the cache first, so that every miss measured also evicts, as in a cache that has run a while.
  while ((caching.store as MemoryResponseCache).size < maxBytes * 0.99) await miss();
  await miss();
  const stored = new AnswerCapture(
    {
      ...openTicket(
        caching,
        caller,
        headers,
        res,
        (bytes: Buffer) => ({ route: 'chat-completions', model: 'delta/delta-4.7', forwarded: bytes, headers: [] }),
        fixed,
      )!,
    },
    caching,
  );
  stored.add(answer);
  stored.store({ contentType: 'application/json', stream: false, model: 'delta/delta-4.7', usage });
  await measure(hit);
  const misses: number[] = [];
  const hits: number[] = [];
  for (let round = 0; round < rounds; round += 1) {
    misses.push(await measure(miss));
    // The entry read on every hit was just stored again if the misses evicted it.
    stored.spoiled = false;
    const again = new AnswerCapture(stored.ticket, caching);
    again.add(answer);
    again.store({ contentType: 'application/json', stream: false, model: 'delta/delta-4.7', usage });
    hits.push(await measure(hit));
  }
  const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;
  return { miss: median(misses), hit: median(hits) };
}

if (import.meta.url === `file://${process.argv[1]}`)
  process.stdout.write(`${JSON.stringify(await cacheCost(7, 50_000, Number(process.argv[2] ?? 64) * 1024 * 1024))}\n`);
