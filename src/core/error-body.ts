import type { ErrorKind, GatewayError } from './gateway-errors.ts';

/**
 * Which error envelope a route answers with beside the spec's `detail`, so that the official SDKs of
 * each wire format show the message: `completions-envelope` routes (Chat Completions, Responses) carry
 * `error:{message,type,param,code}`, `messages-envelope` routes (Messages) carry `type:"error", error:{type,message}`,
 * `plain` routes only `detail`.
 */
export type ErrorFamily = 'completions-envelope' | 'messages-envelope' | 'plain';

const COMPLETIONS_TYPES: Record<ErrorKind, string> = {
  invalid_request: 'invalid_request_error',
  authentication: 'authentication_error',
  permission: 'permission_error',
  not_found: 'not_found_error',
  request_too_large: 'invalid_request_error',
  rate_limit: 'rate_limit_error',
  upstream: 'upstream_error',
  timeout: 'timeout_error',
  internal: 'server_error',
};

const MESSAGES_TYPES: Record<ErrorKind, string> = {
  invalid_request: 'invalid_request_error',
  authentication: 'authentication_error',
  permission: 'permission_error',
  not_found: 'not_found_error',
  request_too_large: 'request_too_large',
  rate_limit: 'rate_limit_error',
  upstream: 'api_error',
  timeout: 'timeout_error',
  internal: 'api_error',
};

/** The JSON body of a gateway-made error, in the given family's shape. */
export function errorBody(error: GatewayError, family: ErrorFamily): Record<string, unknown> {
  const body: Record<string, unknown> = { detail: error.detail };
  if (error.errors) body.errors = error.errors;
  const message = error.errors?.length ? `${error.detail}: ${error.errors.join('; ')}` : error.detail;
  if (family === 'completions-envelope') {
    body.error = { message, type: COMPLETIONS_TYPES[error.kind], param: error.param ?? null, code: error.code };
  } else if (family === 'messages-envelope') {
    body.type = 'error';
    body.error = { type: MESSAGES_TYPES[error.kind], message };
  }
  return body;
}
