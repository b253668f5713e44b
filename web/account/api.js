// Calls to /account/api: JSON in and out, the session's CSRF token on every write.

let csrfToken = '';

/** Remembers the CSRF token of the signed-in session (empty when signed out). */
export function setCsrfToken(token) {
  csrfToken = token ?? '';
}

/**
 * An error answered by the gateway: its status, its `detail`, the raw field `errors` (`Field '<path>': <message>`)
 * for forms to place next to their fields, and as its message all of them joined.
 */
export class ApiError extends Error {
  constructor(status, detail, errors = []) {
    super([detail, ...errors].join(' · '));
    this.status = status;
    this.detail = detail;
    this.errors = errors;
  }
}

/**
 * Calls `/account/api${path}`; resolves with the parsed JSON (undefined for 204), rejects with an
 * ApiError naming the gateway's `detail` and field `errors`.
 */
export async function api(path, { method = 'GET', body } = {}) {
  const headers = { accept: 'application/json' };
  if (method !== 'GET') {
    headers['x-csrf-token'] = csrfToken;
    if (body !== undefined) headers['content-type'] = 'application/json';
  }
  const response = await fetch(`/account/api${path}`, {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
    credentials: 'same-origin',
    cache: 'no-store',
  });
  if (response.status === 204) return undefined;
  const text = await response.text();
  let json;
  try {
    json = text ? JSON.parse(text) : undefined;
  } catch {
    json = undefined;
  }
  if (!response.ok) {
    const detail = json?.detail ?? `Request failed with status ${response.status}`;
    const errors = Array.isArray(json?.errors) ? json.errors : [];
    throw new ApiError(response.status, detail, errors);
  }
  return json;
}
