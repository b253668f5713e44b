import { execFile } from 'node:child_process';
import { request } from 'node:http';
import { fileURLToPath, pathToFileURL } from 'node:url';
import OpenAI, { APIError } from 'openai';

/** One large `POST /v1/chat/completions` upload, sent `runs` times one after the other. */
export interface UploadPlan {
  readonly client: 'http' | 'openai';
  /** The gateway's `http://host:port`. */
  readonly url: string;
  readonly key: string;
  /** Size of the request body. */
  readonly bytes: number;
  /** Without Content-Length (chunked transfer coding) rather than with it. */
  readonly chunked: boolean;
  readonly runs: number;
}

/** What one upload got: the status and parsed JSON body of the answer, or the error that came instead. */
export interface UploadOutcome {
  readonly status?: number;
  readonly body?: unknown;
  /** Set by the `openai` client: the class of the error it raised, and whether that is an `APIError` with a status. */
  readonly errorClass?: string;
  readonly apiError?: boolean;
  /** Set when no answer was read: the error's code or message. */
  readonly failure?: string;
}

const SELF = fileURLToPath(import.meta.url);
const CHUNK_BYTES = 1024 * 1024;

/**
 * Runs the uploads in a child process. The client must not share the gateway's event loop: within one
 * process the gateway's reset and the client's write error are handled in an order that hides the race
 * between reading the early answer and failing on the write (seen 0 times in 10 in one process, 7 in 18
 * from a child process, before the gateway lingered).
 */
export function runUploads(plan: UploadPlan): Promise<UploadOutcome[]> {
  return new Promise((resolve, reject) => {
    execFile(
      process.execPath,
      ['--import', 'tsx', SELF, JSON.stringify(plan)],
      { maxBuffer: 16 * 1024 * 1024 },
      (error, stdout, stderr) => {
        if (error) reject(new Error(`the upload client failed: ${error.message}\n${stderr}`));
        else resolve(JSON.parse(stdout) as UploadOutcome[]);
      },
    );
  });
}

function jsonPrefix(bytes: number): Buffer {
  const body = Buffer.alloc(bytes, 'a');
  body.write('{"model":"zeta/zeta-k3","messages":[{"role":"user","content":"');
  return body;
}

/**
 * A raw node:http client: writes the body as fast as the socket takes it, and reads the answer as soon
 * as it arrives. It writes one chunk per turn of the event loop, after the turn polled the socket: a
 * write the kernel takes at once emits 'drain' on the next tick, and a pump chained on that alone can
 * write tens of MiB without polling once (12 chunks in one turn seen), past the gateway's linger (twice
 * the 10 MiB body limit) into the reset that ends it, failing with EPIPE before reading the answer
 * already waiting in its receive buffer. So at most one chunk goes out after the answer arrived before
 * it is read; then the client stops sending (node:http ends the connection after a `Connection: close`
 * answer), and an error of the upload after the answer arrived is no failure. Only an answer read
 * whole counts.
 */
function rawUpload(plan: UploadPlan): Promise<UploadOutcome> {
  const { hostname, port } = new URL(plan.url);
  const body = jsonPrefix(plan.bytes);
  return new Promise((resolve) => {
    const headers: Record<string, string | number> = {
      authorization: `Bearer ${plan.key}`,
      'content-type': 'application/json',
    };
    if (!plan.chunked) headers['content-length'] = plan.bytes;
    const req = request({ host: hostname, port, method: 'POST', path: '/v1/chat/completions', headers });
    let responded = false;
    let settled = false;
    const settle = (outcome: UploadOutcome) => {
      if (settled) return;
      settled = true;
      resolve(outcome);
    };
    req.on('response', (res) => {
      responded = true;
      const chunks: Buffer[] = [];
      res.on('data', (chunk: Buffer) => chunks.push(chunk));
      res.on('end', () => {
        const text = Buffer.concat(chunks).toString();
        let parsed: unknown = text;
        try {
          parsed = JSON.parse(text);
        } catch {
          // Kept as text: the test shows what came.
        }
        settle({ status: res.statusCode, body: parsed });
      });
      // The answer cut before its end: not read.
      res.on('close', () => settle({ status: res.statusCode, failure: 'the answer was cut before its end' }));
    });
    // Once the answer arrived, the end of the upload (the gateway closing its side) is no failure.
    req.on('error', (error: NodeJS.ErrnoException) => {
      if (!responded) settle({ failure: error.code ?? error.message });
    });
    let sent = 0;
    const pump = () => {
      if (responded || req.destroyed) return;
      const chunk = body.subarray(sent, sent + CHUNK_BYTES);
      sent += chunk.length;
      if (sent === body.length) req.end(chunk);
      else if (req.write(chunk)) setImmediate(pump);
      else req.once('drain', () => setImmediate(pump));
    };
    pump();
  });
}

/** `fetch` sending the body as a stream, so without Content-Length. */
const streamingFetch: typeof fetch = (input, init) => {
  const bytes = Buffer.from(init!.body as string);
  const body = new ReadableStream<Uint8Array>({
    start(controller) {
      for (let at = 0; at < bytes.length; at += CHUNK_BYTES) controller.enqueue(bytes.subarray(at, at + CHUNK_BYTES));
      controller.close();
    },
  });
  const headers = new Headers(init!.headers);
  headers.delete('content-length');
  return fetch(input, { ...init, headers, body, duplex: 'half' } as RequestInit);
};

/** The official SDK, with its default retries (2): a connection error would be retried, sending the body again. */
async function sdkUpload(plan: UploadPlan, content: string): Promise<UploadOutcome> {
  const client = new OpenAI({
    baseURL: `${plan.url}/v1`,
    apiKey: plan.key,
    maxRetries: 2,
    timeout: 60_000,
    ...(plan.chunked ? { fetch: streamingFetch } : {}),
  });
  try {
    await client.chat.completions.create({ model: 'zeta/zeta-k3', messages: [{ role: 'user', content }] });
    return { failure: 'the request succeeded' };
  } catch (error) {
    if (!(error instanceof Error)) return { failure: String(error) };
    const apiError = error instanceof APIError;
    return {
      errorClass: error.constructor.name,
      apiError,
      status: apiError ? error.status : undefined,
      body: apiError ? error.error : undefined,
      failure: error.message,
    };
  }
}

async function main(plan: UploadPlan): Promise<void> {
  // The SDK sends JSON: a message that makes the body `plan.bytes` long.
  const content = plan.client === 'openai' ? 'a'.repeat(plan.bytes - 80) : '';
  const outcomes: UploadOutcome[] = [];
  for (let run = 0; run < plan.runs; run += 1)
    outcomes.push(plan.client === 'http' ? await rawUpload(plan) : await sdkUpload(plan, content));
  process.stdout.write(JSON.stringify(outcomes));
}

if (process.argv[1] && pathToFileURL(process.argv[1]).href === import.meta.url) {
  main(JSON.parse(process.argv[2]!) as UploadPlan).catch((error: unknown) => {
    process.stderr.write(`${String(error)}\n`);
    process.exit(1);
  });
}
