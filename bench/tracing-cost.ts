import { spawn } from 'node:child_process';
import { setImmediate as yieldToLoop } from 'node:timers/promises';
import { DEFAULT_TRACING, type TracingSettings } from '../src/ops/tracing/tracing-settings.ts';
import { startTracing } from '../src/ops/tracing/otel-tracing.ts';
import { WIRE_FORMATS } from '../src/core/formats/index.ts';

/** A collector in a process of its own (its CPU is not the gateway's): answers every export 200. */
async function startCollector(): Promise<{ url: string; stop(): void }> {
  const code =
    "const s=require('node:http').createServer((q,r)=>{q.resume();q.on('end',()=>r.writeHead(200,{'content-type':'application/x-protobuf'}).end())});s.listen(0,'127.0.0.1',()=>process.send(s.address().port));";
  const child = spawn(process.execPath, ['-e', code], { stdio: ['ignore', 'ignore', 'inherit', 'ipc'] });
  const port = await new Promise<number>((resolve) => child.once('message', (message) => resolve(message as number)));
  return { url: `http://127.0.0.1:${port}`, stop: () => void child.kill() };
}

const ANSWER = {
  id: 'chatcmpl-1',
  object: 'chat.completion',
  model: 'delta-4.7',
  choices: [{ index: 0, message: { role: 'assistant', content: 'Hello there' }, finish_reason: 'stop' }],
  usage: { prompt_tokens: 21, completion_tokens: 9 },
};

/**
 * What tracing adds to one request, in process: the calls the data plane makes on a traced JSON
 * request (the server span with its attributes, the authentication attributes, one attempt's client
 * span with its `traceparent`, its answer's facts, usage and outcome) and the export (the batch processor and the
 * OTLP/HTTP protobuf exporter, to a collector in another process), against the same loop with tracing off. The GenAI
 * metrics over OTLP cost nothing per request (they are read from the `/metrics` histograms at each export). CPU µs per
 * request, median of rounds: end-to-end runs on these shared 2-core machines bury a figure of this size in their noise.
 */
export async function tracingCost(
  rounds = 7,
  perRound = 20_000,
): Promise<{ off: number; ratio1: number; ratio01: number; ratio0: number }> {
  const collector = await startCollector();
  const settings = (ratio: number): TracingSettings => ({
    ...DEFAULT_TRACING,
    traces: { url: `${collector.url}/v1/traces`, protocol: 'http/protobuf', headers: {}, timeoutMs: 10_000 },
    sampler: { name: 'parentbased_traceidratio', ratio },
  });
  const counts = { exported: () => {}, dropped: () => {} };
  const contenders = {
    off: undefined,
    ratio1: { tracing: startTracing(settings(1), counts, 'bench')! },
    ratio01: { tracing: startTracing(settings(0.1), counts, 'bench')! },
    // Every request sampled out: the decision and the unsampled traceparent alone.
    ratio0: { tracing: startTracing(settings(0), counts, 'bench')! },
  };
  const headers = { host: '127.0.0.1', 'content-type': 'application/json', authorization: 'Bearer sk-…' };
  const one = (on: (typeof contenders)['ratio1'] | undefined, index: number) => {
    if (on === undefined) return;
    const trace = on.tracing.requests.startRequest({
      headers,
      method: 'POST',
      route: '/v1/chat/completions',
      path: '/v1/chat/completions',
      requestId: `request-${index}`,
    });
    // An unsampled request stops here: it carries its traceparent and is followed no further.
    if (!trace.recording) return trace.traceparent;
    trace.set({ 'gateway.key.id': 'static_0123456789abcdef' });
    const attempt = trace.attempt({
      operation: 'chat',
      stream: false,
      provider: 'delta',
      requestModel: 'delta-4.7',
      model: 'delta/delta-4.7',
      endpoint: '0',
      origin: 'http://127.0.0.1:9000',
    });
    attempt.responded(200);
    const facts = {};
    WIRE_FORMATS['chat-completions'].genAi.fromBody(ANSWER, facts);
    const usage = { inputTokens: 21, outputTokens: 9, cachedTokens: 0 };
    trace.recorded({
      status: 200,
      outcome: 'complete',
      model: 'delta/delta-4.7',
      usage,
      costUsd: 0.0001,
      facts,
      upstreamStatus: 200,
      attempts: 1,
    });
    trace.end(200);
    return attempt.traceparent;
  };
  const measure = async (name: keyof typeof contenders) => {
    const on = contenders[name];
    const start = process.cpuUsage();
    for (let index = 0; index < perRound; index += 1) {
      one(on, index);
      // As a loaded gateway does between requests: the batch processor's exports get their turn.
      if (index % 256 === 255) await yieldToLoop();
    }
    await on?.tracing.flush();
    const spent = process.cpuUsage(start);
    return (spent.user + spent.system) / perRound;
  };
  const names = Object.keys(contenders) as (keyof typeof contenders)[];
  for (const name of names) await measure(name);
  const runs: Record<string, number[]> = { off: [], ratio1: [], ratio01: [], ratio0: [] };
  for (let round = 0; round < rounds; round += 1)
    for (const name of round % 2 === 0 ? names : [...names].reverse()) runs[name]!.push(await measure(name));
  for (const on of [contenders.ratio1, contenders.ratio01, contenders.ratio0]) await on.tracing.shutdown();
  collector.stop();
  const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;
  return {
    off: median(runs.off!),
    ratio1: median(runs.ratio1!),
    ratio01: median(runs.ratio01!),
    ratio0: median(runs.ratio0!),
  };
}

if (import.meta.url === `file://${process.argv[1]}`) process.stdout.write(`${JSON.stringify(await tracingCost())}\n`);
