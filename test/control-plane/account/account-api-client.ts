import { expect } from 'chai';
import type { GuardedApp } from '../../data-plane/pipeline/guarded-app.ts';

/** An answer of the account API: its status, headers, body text and the body as JSON (`{}` when not JSON). */
export interface Reply {
  status: number;
  headers: Headers;
  text: string;
  json: Record<string, any>;
}

/** One request to the app with optional cookie, CSRF token and extra headers. */
export async function call(
  app: GuardedApp,
  path: string,
  options: { method?: string; body?: unknown; cookie?: string; csrf?: string; headers?: Record<string, string> } = {},
): Promise<Reply> {
  const headers: Record<string, string> = { ...options.headers };
  if (options.body !== undefined) headers['content-type'] = 'application/json';
  if (options.cookie) headers.cookie = options.cookie;
  if (options.csrf) headers['x-csrf-token'] = options.csrf;
  const response = await fetch(`${app.url}${path}`, {
    method: options.method ?? 'GET',
    headers,
    body: options.body === undefined ? undefined : JSON.stringify(options.body),
  });
  const text = await response.text();
  let json: Record<string, any> = {};
  try {
    json = JSON.parse(text);
  } catch {
    /* not JSON (a CSV, a page) */
  }
  return { status: response.status, headers: response.headers, text, json };
}

/** Signs in with the admin token; the cookie pair to send back, the session's CSRF token and the whole Set-Cookie. */
export async function signIn(
  app: GuardedApp,
  token: string,
  headers: Record<string, string> = {},
): Promise<{ cookie: string; csrf: string; setCookie: string }> {
  const reply = await call(app, '/account/api/session', { method: 'POST', body: { token }, headers });
  expect(reply.status, reply.text).to.equal(201);
  const setCookie = reply.headers.get('set-cookie')!;
  return { cookie: setCookie.split(';')[0]!, csrf: reply.json.csrf_token, setCookie };
}
