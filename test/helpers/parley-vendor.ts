import type { IncomingMessage, ServerResponse } from 'node:http';
import { sleep } from './eventually.ts';
import { ScriptedUpstream } from './scripted-upstream.ts';

/** What a scripted Parley answers next, beside its normal answer. */
export type ParleyBehaviour =
  | {
      readonly kind: 'fault';
      readonly status: number;
      readonly fault: { kind: string; text: string };
      readonly headers?: Record<string, string>;
    }
  | { readonly kind: 'fault-event'; readonly afterChunks: number }
  | { readonly kind: 'cut'; readonly afterChunks: number }
  | { readonly kind: 'reset' };

const words = (text: string) => text.split(/\s+/).filter(Boolean).length;

/**
 * The invented vendor Parley on a real socket, speaking exactly its own wire format: `POST /v2/generate`
 * with `{engine, dialog: [{from, say}], limits?: {max_words}, stream?}` and `Authorization: Token <key>`;
 * a JSON answer `{reply: {say}, tally: {prompt, reply}}`, or `event: chunk` `{say}` events closed by
 * `event: end` `{tally}`; errors as `{fault: {kind, text}}` with their status. It counts words as its
 * tokens: the prompt's words, and the reply's. A request it cannot read is its 400, as a vendor's.
 */
export class ParleyVendor {
  /** The reply text, in the chunks it streams in (joined with nothing for a JSON answer). */
  chunks: readonly string[] = ['Parley ', 'says ', 'hello.'];
  /** Behaviours for this vendor's next requests, in order. */
  readonly queue: ParleyBehaviour[] = [];
  /** Ms between streamed events. */
  eventDelayMs = 0;
  /** When each request came (`performance.now()`), in the order of `requests`. */
  readonly times: number[] = [];

  private constructor(
    readonly upstream: ScriptedUpstream,
    readonly key: string,
    /** Behaviours for the next requests to any vendor sharing it (whichever gets one first), before this one's own. */
    private readonly shared: ParleyBehaviour[] | undefined,
  ) {
    upstream.script = (req, res, body) => this.answer(req, res, body);
  }

  static async start(key: string, shared?: ParleyBehaviour[]): Promise<ParleyVendor> {
    return new ParleyVendor(await ScriptedUpstream.start(), key, shared);
  }

  /** The base URL the gateway is given (Parley's paths carry their version, /v2). */
  get baseUrl(): string {
    return this.upstream.url.replace(/\/v1$/, '');
  }

  get requests() {
    return this.upstream.requests;
  }

  /** The tally Parley reports for a dialog and a reply. */
  static tally(dialog: readonly { say: string }[], reply: string): { prompt: number; reply: number } {
    return { prompt: dialog.reduce((sum, turn) => sum + words(turn.say), 0), reply: words(reply) };
  }

  close(): Promise<void> {
    return this.upstream.close();
  }

  private fault(
    res: ServerResponse,
    status: number,
    kind: string,
    text: string,
    headers: Record<string, string> = {},
  ): void {
    res
      .writeHead(status, { 'content-type': 'application/json', ...headers })
      .end(JSON.stringify({ fault: { kind, text } }));
  }

  private async answer(req: IncomingMessage, res: ServerResponse, text: string): Promise<void> {
    this.times.push(performance.now());
    if (req.method !== 'POST' || req.url !== '/v2/generate')
      return this.fault(res, 404, 'no_such_path', `No ${req.method} ${req.url}`);
    if (req.headers.authorization !== `Token ${this.key}`) return this.fault(res, 401, 'bad_token', 'Unknown token');
    let body: { engine?: unknown; dialog?: unknown; limits?: { max_words?: unknown }; stream?: unknown };
    try {
      body = JSON.parse(text) as typeof body;
    } catch {
      return this.fault(res, 400, 'bad_json', 'The body is not JSON');
    }
    const dialog = body.dialog as { from?: unknown; say?: unknown }[];
    const known = Object.keys(body).every((key) => ['engine', 'dialog', 'limits', 'stream'].includes(key));
    const turns =
      Array.isArray(dialog) &&
      dialog.length > 0 &&
      dialog.every(
        (turn) => ['system', 'human', 'assistant'].includes(turn.from as string) && typeof turn.say === 'string',
      );
    const limits =
      body.limits === undefined || (Number.isInteger(body.limits.max_words) && (body.limits.max_words as number) > 0);
    if (
      !known ||
      typeof body.engine !== 'string' ||
      !turns ||
      !limits ||
      (body.stream !== undefined && body.stream !== true)
    ) {
      return this.fault(res, 400, 'bad_dialog', `Parley cannot read this request: ${text.slice(0, 200)}`);
    }
    const behaviour = this.shared?.shift() ?? this.queue.shift();
    if (behaviour?.kind === 'reset') return void req.socket.destroy();
    if (behaviour?.kind === 'fault')
      return this.fault(res, behaviour.status, behaviour.fault.kind, behaviour.fault.text, behaviour.headers);
    const reply = this.chunks.join('');
    const tally = ParleyVendor.tally(dialog as { say: string }[], reply);
    if (body.stream !== true) {
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ reply: { say: reply }, tally }));
      return;
    }
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    res.flushHeaders();
    for (const [index, say] of this.chunks.entries()) {
      if (behaviour?.kind === 'cut' && index === behaviour.afterChunks) return void res.socket?.destroy();
      if (behaviour?.kind === 'fault-event' && index === behaviour.afterChunks) {
        res.end(
          `event: fault\ndata: ${JSON.stringify({ kind: 'overloaded', text: 'Parley lost its train of thought' })}\n\n`,
        );
        return;
      }
      res.write(`event: chunk\ndata: ${JSON.stringify({ say })}\n\n`);
      if (this.eventDelayMs) await sleep(this.eventDelayMs);
    }
    res.end(`event: end\ndata: ${JSON.stringify({ tally })}\n\n`);
  }
}
