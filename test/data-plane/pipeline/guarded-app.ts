import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Writable } from 'node:stream';
import express, { type RequestHandler, type Router } from 'express';
import { pino, type Logger } from 'pino';
import { errorMiddleware } from '../../../src/data-plane/answer-error.ts';

/** A pino logger writing into memory, to check what reaches the logs. */
export function captureLogs(): { logger: Logger; text: () => string } {
  const lines: string[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _encoding, done) {
      lines.push(chunk.toString());
      done();
    },
  });
  return { logger: pino({ level: 'trace' }, sink), text: () => lines.join('') };
}

export interface GuardedApp {
  readonly url: string;
  close(): Promise<void>;
}

/**
 * A tiny app on a real socket, as the gateway mounts the pieces: `GET /v1/models` behind the catalog
 * guard, `POST /v1/chat/completions` and the Messages paths behind the model guard (answering the caller from
 * `res.locals.apiKey`), optional routers, and the gateway's error middleware (plain `{detail}` bodies).
 */
export async function startGuardedApp(options: {
  model?: RequestHandler[];
  catalog?: RequestHandler[];
  routers?: Record<string, Router>;
  logger?: Logger;
}): Promise<GuardedApp> {
  const app = express();
  app.get('/v1/models', ...(options.catalog ?? []), (_req, res) => void res.json({ data: [] }));
  for (const path of ['/v1/chat/completions', '/v1/messages', '/v1/messages/count_tokens']) {
    app.post(path, ...(options.model ?? []), (_req, res) => void res.json({ caller: res.locals.apiKey ?? null }));
  }
  for (const [path, router] of Object.entries(options.routers ?? {})) app.use(path, router);
  app.use(errorMiddleware(() => 'plain', options.logger ?? pino({ level: 'silent' })));
  const server: Server = await new Promise((resolve) => {
    const listening = app.listen(0, '127.0.0.1', () => resolve(listening));
  });
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

export interface Answer {
  readonly status: number;
  readonly headers: Headers;
  readonly body: Record<string, any>;
  readonly ms: number;
}

/** One request with an optional bearer key; the JSON answer and how long it took. */
export async function send(
  url: string,
  path: string,
  options: { key?: string; authorization?: string; apiKey?: string; method?: string; body?: unknown } = {},
): Promise<Answer> {
  const headers: Record<string, string> = { 'content-type': 'application/json' };
  if (options.key !== undefined) headers.authorization = `Bearer ${options.key}`;
  if (options.authorization !== undefined) headers.authorization = options.authorization;
  if (options.apiKey !== undefined) headers['x-api-key'] = options.apiKey;
  const method = options.method ?? (path === '/v1/models' ? 'GET' : 'POST');
  const started = performance.now();
  const response = await fetch(`${url}${path}`, {
    method,
    headers,
    body: method === 'GET' || method === 'DELETE' ? undefined : JSON.stringify(options.body ?? {}),
  });
  const text = await response.text();
  return {
    status: response.status,
    headers: response.headers,
    body: text ? (JSON.parse(text) as Record<string, any>) : {},
    ms: performance.now() - started,
  };
}

export { eventually, sleep } from '../../helpers/eventually.ts';
