/**
 * The gateway's interface description: OpenAPI 3.1 (JSON Schema 2020-12 schemas), version `1.0.0`
 * (spec §9), served at `GET /openapi.json`. Request schemas list the fields the gateway checks; every
 * other field is forwarded untouched, so bodies stay open (`additionalProperties` allowed). They are
 * derived at start from the yup schemas that validate the bodies, never written here. The
 * compatible routes answer with the upstream's own bodies, described only as JSON objects or SSE.
 */

import { NATIVE_CHAT_SCHEMA, REQUEST_SCHEMAS } from '../../data-plane/routes/request-schemas.ts';
import { requestJsonSchema } from './request-json-schema.ts';
import { MODEL_ROUTES, ROUTE_TABLE } from '../../core/route-table.ts';
import { MANAGEMENT_PATHS, MANAGEMENT_SCHEMAS } from './management-paths.ts';
import { GROUP_FIELD, GROUP_PATHS, GROUP_SCHEMAS } from './group-paths.ts';
import { ALERT_PATHS, ALERT_SCHEMAS, ALERT_THRESHOLDS } from './alert-paths.ts';
import { USAGE_COUNT_FIELDS } from '../../usage/usage-accounting.ts';
import { TEAM_FIELDS } from '../../core/limits.ts';
import { MONEY_BUDGET, nullableFields, positiveInteger, TOKEN_QUOTA } from './limit-schemas.ts';
import {
  adminErrors,
  deletedByName,
  error,
  json,
  listOf,
  nameParameter,
  newNamedRecord,
  RECORD_NAME_PATTERN,
  ref,
} from './openapi-parts.ts';

/** The request bodies' components, derived from the routes' yup schemas (the one written form of each shape). */
const REQUEST_COMPONENTS = {
  ChatCompletionsRequest: requestJsonSchema(REQUEST_SCHEMAS['chat-completions'], 'chat-completions'),
  ResponsesRequest: requestJsonSchema(REQUEST_SCHEMAS.responses, 'responses'),
  MessagesRequest: requestJsonSchema(REQUEST_SCHEMAS.messages, 'messages'),
  CountTokensRequest: requestJsonSchema(REQUEST_SCHEMAS['count-tokens'], 'count-tokens'),
  NativeChatRequest: requestJsonSchema(NATIVE_CHAT_SCHEMA, 'chat'),
};

function modelRoute(summary: string, body: string, envelope: 'Completions' | 'Messages', streams: boolean) {
  return {
    post: {
      summary,
      security: [{ bearer: [] }, { apiKey: [] }],
      parameters: [{ $ref: '#/components/parameters/RequestId' }],
      requestBody: { required: true, content: json(ref(body)) },
      responses: {
        '200': {
          description: "The upstream's answer, returned unchanged apart from the model's declared stream fixups",
          headers: { 'x-request-id': { $ref: '#/components/headers/RequestId' } },
          content: {
            ...json({ type: 'object' }),
            ...(streams ? { 'text/event-stream': { schema: { type: 'string' } } } : {}),
          },
        },
        '400': error(
          'Invalid body: every bad field listed; or a guardrail blocked the request or the answer (GW_ERR_GUARDRAIL; in band once a stream started)',
          envelope,
        ),
        '401': error('Missing or unknown API key', envelope),
        '403': error('The key may not use this model', envelope),
        '413': error('Body larger than the limit', envelope),
        '429': error(
          'A request, token, quota, budget or concurrency limit of the key or its team reached (Retry-After until it has room)',
          envelope,
        ),
        '502': error('The upstream failed or is not configured', envelope),
        '503': error(
          'A store the gateway needs is unavailable, or a webhook guardrail that fails closed could not check the text (GW_ERR_GUARDRAIL)',
          envelope,
        ),
        '504': error('The upstream did not answer in time', envelope),
      },
    },
  };
}

const TEAM_LIMITS = {
  rpm: positiveInteger,
  tpm: positiveInteger,
  quota: TOKEN_QUOTA,
  budget: MONEY_BUDGET,
  concurrency: {
    ...positiveInteger,
    description: "Requests of the team's keys in flight at once, per gateway instance",
  },
};
/** Per-end-user limits: each end user (the request's `user`, `metadata.user_id` or `x-gateway-end-user`) gets them. */
const END_USER_LIMITS = {
  type: 'object',
  additionalProperties: false,
  minProperties: 1,
  properties: {
    rpm: { ...positiveInteger, description: 'Requests per UTC minute, per end user' },
    tpm: TEAM_LIMITS.tpm,
    quota: TEAM_LIMITS.quota,
    budget: TEAM_LIMITS.budget,
  },
};
/** A team's limits, its response cache setting and its guardrails (not limits: nothing is counted). */
const TEAM_SETTINGS = {
  ...TEAM_LIMITS,
  end_user: {
    ...END_USER_LIMITS,
    description:
      "Limits each end user of the team's keys gets separately, per team (a request naming none counts as its key)",
  },
  cache: {
    type: 'boolean',
    description:
      "false: the team's keys never read or write the response cache; true (kept as set) or absent: the gateway's setting applies",
  },
  guardrails: {
    type: 'array',
    items: { type: 'string', pattern: '^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$' },
    description:
      "The configured guardrails (the config file's guardrails:) the team's keys get, unless a key names its own; [] for none; absent: every configured one",
  },
  group: GROUP_FIELD,
  alerts: ALERT_THRESHOLDS,
};

/** A key's settings besides its name: the team's, and the models it may use, its expiry and its team. */
const KEY_SETTINGS = {
  rpm: { ...positiveInteger, description: "Requests per rate-limit window, instead of the gateway's" },
  tpm: TEAM_LIMITS.tpm,
  quota: TEAM_LIMITS.quota,
  budget: TEAM_LIMITS.budget,
  concurrency: {
    ...positiveInteger,
    description: "Requests of the key in flight at once, per gateway instance, instead of the gateway's",
  },
  models: {
    type: 'array',
    minItems: 1,
    items: { type: 'string' },
    description: 'Canonical model IDs (vendor/model) the key may use; absent: every model',
  },
  expires_at: {
    type: 'string',
    description: 'ISO 8601 date-time in the future after which the key is refused; absent: never',
  },
  team: {
    type: 'string',
    pattern: RECORD_NAME_PATTERN,
    description: 'An existing team whose limits the key shares',
  },
  cache: {
    type: 'boolean',
    description:
      "false: the key's requests never read or write the response cache; true (kept as set) or absent: the gateway's (and team's) setting applies",
  },
  guardrails: {
    ...TEAM_SETTINGS.guardrails,
    description:
      "The configured guardrails the key's requests get, over its team's; [] for none; absent: its team's (else every configured one)",
  },
  group: GROUP_FIELD,
  end_user: {
    ...END_USER_LIMITS,
    description: 'Limits each end user of the key gets separately (a request naming none counts as the key itself)',
  },
  alerts: ALERT_THRESHOLDS,
};
const keyName = { type: 'string', minLength: 1, maxLength: 200 };
const keyId = { name: 'id', in: 'path', required: true, schema: { type: 'string' } };
const revoked = {
  description: 'Revoked',
  content: json({
    type: 'object',
    required: ['id', 'revoked'],
    properties: { id: { type: 'string' }, revoked: { const: true } },
  }),
};

/** The admin API's key routes (`/admin/keys`), behind the admin token. */
const KEY_PATHS = {
  '/admin/keys': {
    post: {
      summary: 'Creates a key: the key itself is in this answer only, never stored (only its hash)',
      security: [{ adminToken: [] }],
      requestBody: { required: true, content: json(ref('NewKey')) },
      responses: {
        '201': { description: 'The key, with `key` shown this once', content: json(ref('CreatedKey')) },
        '400': error('Invalid body, an unknown team, group, model or guardrail: every bad field listed', 'Plain'),
        ...adminErrors,
      },
    },
    get: {
      summary: 'Every managed key (never the key itself nor its hash)',
      security: [{ adminToken: [] }],
      responses: {
        '200': listOf('The keys', 'Key'),
        ...adminErrors,
      },
    },
  },
  '/admin/keys/{id}': {
    patch: {
      summary:
        "Changes a key's name, limits and settings: each set (an object replaces the whole limit), null to remove it, absent to keep it; reaches admission on every instance within a second",
      security: [{ adminToken: [] }],
      parameters: [keyId],
      requestBody: { required: true, content: json(ref('KeyChanges')) },
      responses: {
        '200': { description: 'The key as changed', content: json(ref('Key')) },
        '400': error(
          'Invalid or empty body, an unknown team, group, model or guardrail: every bad field listed',
          'Plain',
        ),
        '404': error('No key with that id', 'Plain'),
        '409': error('The key is revoked (a revoked key is not changed)', 'Plain'),
        ...adminErrors,
      },
    },
    delete: {
      summary: 'Revokes a key (the same as POST /admin/keys/{id}/revoke): refused on every instance within a second',
      security: [{ adminToken: [] }],
      parameters: [keyId],
      responses: { '200': revoked, '404': error('No key with that id', 'Plain'), ...adminErrors },
    },
  },
  '/admin/keys/{id}/revoke': {
    post: {
      summary: 'Revokes a key: refused on every instance within a second',
      security: [{ adminToken: [] }],
      parameters: [keyId],
      responses: { '200': revoked, '404': error('No key with that id', 'Plain'), ...adminErrors },
    },
  },
};

/** The admin API's team routes (`/admin/teams`), behind the admin token. */
const TEAM_PATHS = {
  '/admin/teams': {
    post: {
      summary: 'Creates a team: a name keys can name, and the limits its keys share',
      security: [{ adminToken: [] }],
      requestBody: { required: true, content: json(ref('NewTeam')) },
      responses: {
        '201': { description: 'The team', content: json(ref('Team')) },
        '400': error('Invalid body: every bad field listed', 'Plain'),
        '409': error('A team of that name exists', 'Plain'),
        ...adminErrors,
      },
    },
    get: {
      summary: 'Every team',
      security: [{ adminToken: [] }],
      responses: {
        '200': listOf('The teams', 'Team'),
        ...adminErrors,
      },
    },
  },
  '/admin/limits': {
    get: {
      summary:
        "Every key's and team's limits and their use in the windows open now (tokens per minute, quotas, money budgets)",
      security: [{ adminToken: [] }],
      responses: {
        '200': {
          description: 'The limits and their use',
          content: json({
            type: 'object',
            required: ['object', 'metered', 'generated_at', 'keys', 'teams'],
            properties: {
              object: { const: 'limits' },
              metered: { type: 'boolean' },
              generated_at: { type: 'string', format: 'date-time' },
              keys: { type: 'array', items: ref('LimitOwner') },
              teams: { type: 'array', items: ref('LimitOwner') },
            },
          }),
        },
        '503': error('A store or the limit counters cannot be read', 'Plain'),
        ...adminErrors,
      },
    },
  },
  '/admin/teams/{name}': {
    get: {
      summary: 'One team',
      security: [{ adminToken: [] }],
      parameters: [nameParameter],
      responses: {
        '200': { description: 'The team', content: json(ref('Team')) },
        '404': error('No team of that name', 'Plain'),
        ...adminErrors,
      },
    },
    patch: {
      summary:
        "Changes a team's limits and cache setting: each set (an object replaces the whole limit), null to remove it, absent to keep it",
      security: [{ adminToken: [] }],
      parameters: [nameParameter],
      requestBody: { required: true, content: json(ref('TeamChanges')) },
      responses: {
        '200': { description: 'The team as changed', content: json(ref('Team')) },
        '400': error('Invalid body: every bad field listed', 'Plain'),
        '404': error('No team of that name', 'Plain'),
        ...adminErrors,
      },
    },
    delete: {
      summary: 'Deletes a team no key names any more',
      security: [{ adminToken: [] }],
      parameters: [nameParameter],
      responses: {
        '200': deletedByName,
        '404': error('No team of that name', 'Plain'),
        '409': error('Keys that are not revoked name the team; the detail says how many', 'Plain'),
        ...adminErrors,
      },
    },
  },
};

/** `GET /admin/usage` and `GET /admin/guardrails`, behind the admin token. */
const ADMIN_READ_PATHS = {
  '/admin/usage': {
    get: {
      summary:
        "Every key's usage summed per group (one key's with key_id): per model, UTC day, key id, team (each key's usage " +
        'under the team it names now; team null for keys in none, listed last) or end user of each key (end_user null ' +
        'for requests naming none, listed last)',
      security: [{ adminToken: [] }],
      parameters: [
        { name: 'from', in: 'query', schema: { type: 'string', format: 'date' } },
        { name: 'to', in: 'query', schema: { type: 'string', format: 'date' } },
        {
          name: 'group_by',
          in: 'query',
          schema: { type: 'string', enum: ['model', 'day', 'key', 'team', 'end_user'] },
        },
        { name: 'key_id', in: 'query', schema: { type: 'string' } },
      ],
      responses: {
        '200': { description: 'Usage rows, sorted by their group', content: json(ref('UsageList')) },
        '400': error('Invalid query', 'Plain'),
        '503': error('The usage store is unreachable', 'Plain'),
        ...adminErrors,
      },
    },
  },
  '/admin/guardrails': {
    get: {
      summary: "The guardrails the configuration in force holds, in its order (never a webhook's url or headers)",
      security: [{ adminToken: [] }],
      responses: {
        '200': {
          description: 'The configured guardrails',
          content: json({
            type: 'object',
            required: ['object', 'data'],
            properties: {
              object: { const: 'list' },
              data: {
                type: 'array',
                items: {
                  type: 'object',
                  required: ['name', 'use', 'on', 'action'],
                  additionalProperties: false,
                  properties: {
                    name: { type: 'string' },
                    use: { type: 'string', description: "`regex`, `pii`, `webhook` or a guardrail plugin's name" },
                    on: { enum: ['request', 'response', 'both'] },
                    action: {
                      enum: ['block', 'redact', null],
                      description: 'null for a webhook (its service decides)',
                    },
                  },
                },
              },
            },
          }),
        },
        ...adminErrors,
      },
    },
  },
};

/**
 * `GET /admin/guardrails/actions`, behind the admin token (the account page's `/account/api/guardrails/actions` answers
 * alike).
 */
const GUARDRAIL_ACTION_PATHS = {
  '/admin/guardrails/actions': {
    get: {
      summary:
        'The newest guardrail actions (blocks, redactions, webhooks that let a text pass unchecked), newest first, and every action kept (the newest 1000) counted by guardrail: who and where, never the text or what was found in it',
      security: [{ adminToken: [] }],
      parameters: [
        {
          name: 'limit',
          in: 'query',
          required: false,
          description: 'How many actions `data` lists (100 by default)',
          schema: { type: 'integer', minimum: 1, maximum: 1000 },
        },
      ],
      responses: {
        '200': {
          description:
            'The actions kept, counted (`by_guardrail`, sorted by guardrail, phase and action) and the newest listed (`data`)',
          content: json({
            type: 'object',
            required: ['object', 'by_guardrail', 'data'],
            properties: {
              object: { const: 'list' },
              by_guardrail: {
                type: 'array',
                items: {
                  type: 'object',
                  required: ['guardrail', 'phase', 'action', 'count', 'last_at'],
                  additionalProperties: false,
                  properties: {
                    guardrail: { type: 'string' },
                    phase: { enum: ['request', 'response'] },
                    action: { enum: ['block', 'redact', 'fail_open'] },
                    count: { type: 'integer', minimum: 1 },
                    last_at: { type: 'string', format: 'date-time' },
                  },
                },
              },
              data: {
                type: 'array',
                maxItems: 1000,
                items: {
                  type: 'object',
                  required: [
                    'at',
                    'guardrail',
                    'phase',
                    'action',
                    'cause',
                    'route',
                    'model',
                    'key_id',
                    'team',
                    'request_id',
                  ],
                  additionalProperties: false,
                  properties: {
                    at: { type: 'string', format: 'date-time' },
                    guardrail: { type: 'string' },
                    phase: { enum: ['request', 'response'] },
                    action: {
                      enum: ['block', 'redact', 'fail_open'],
                      description: 'fail_open: a webhook that did not answer let the text pass unchecked',
                    },
                    cause: {
                      enum: ['finding', 'webhook', 'unavailable'],
                      description: "The guardrail's own finding, a webhook's verdict, or a webhook that did not answer",
                    },
                    route: { type: 'string', description: 'The client route, e.g. chat-completions or messages' },
                    model: { type: 'string', description: 'The canonical model id (vendor/model)' },
                    key_id: { type: ['string', 'null'] },
                    team: { type: ['string', 'null'] },
                    request_id: { type: ['string', 'null'] },
                  },
                },
              },
            },
          }),
        },
        '400': error(
          'limit is not a whole number from 1 to 1000, is given twice, or another parameter is given',
          'Plain',
        ),
        '503': error('The action log (Redis) cannot be read', 'Plain'),
        ...adminErrors,
      },
    },
  },
};

/** `DELETE /admin/cache`, behind the admin token. */
const CACHE_PATHS = {
  '/admin/cache': {
    delete: {
      summary:
        "Empties the response cache: every entry, or those of one key (its team's when the key has one) or of one team",
      security: [{ adminToken: [] }],
      parameters: [
        {
          name: 'key_id',
          in: 'query',
          required: false,
          description: "A managed key's id: empties its tenant (the team's when the key names a team)",
          schema: { type: 'string', minLength: 1 },
        },
        {
          name: 'team',
          in: 'query',
          required: false,
          description:
            "A team's name: empties the entries its keys share; for a name no team has now, those the last deleted team of that name left",
          schema: nameParameter.schema,
        },
      ],
      responses: {
        '200': {
          description:
            'How many entries were deleted (0 when no cache is configured), and whose: `team:<name>`, `key:<id>`, or null for every entry',
          content: json({
            type: 'object',
            required: ['deleted', 'tenant'],
            properties: {
              deleted: { type: 'integer', minimum: 0 },
              tenant: { type: ['string', 'null'], pattern: '^(team|key):.+$' },
            },
          }),
        },
        '400': error(
          'key_id and team both given, an unknown parameter, or one given twice or empty; or a request body (the target is given in the query only)',
          'Plain',
        ),
        '404': error('No key with that id, or no team of that name now or before', 'Plain'),
        '503': error('The cache store or the key or team store is unavailable', 'Plain'),
        ...adminErrors,
      },
    },
  },
};

export const OPENAPI_DOCUMENT = {
  openapi: '3.1.0',
  info: {
    title: 'model gateway',
    version: '1.0.0',
    description:
      'One HTTP service in front of several upstream model providers: OpenAI-compatible Chat Completions and Responses, Anthropic-compatible Messages, and a native text route.',
  },
  jsonSchemaDialect: 'https://json-schema.org/draft/2020-12/schema',
  paths: {
    // The model routes, from the route table (the native route answers with its own body).
    ...Object.fromEntries(
      MODEL_ROUTES.filter((route) => route !== ROUTE_TABLE.chat).map((route) => [
        route.path,
        modelRoute(
          route.summary,
          route.requestSchema,
          route.family === 'messages-envelope' ? 'Messages' : 'Completions',
          route.streams,
        ),
      ]),
    ),
    [ROUTE_TABLE.chat.path]: {
      post: {
        summary: ROUTE_TABLE.chat.summary,
        security: [{ bearer: [] }, { apiKey: [] }],
        parameters: [{ $ref: '#/components/parameters/RequestId' }],
        requestBody: { required: true, content: json(ref(ROUTE_TABLE.chat.requestSchema)) },
        responses: {
          '200': {
            description: 'The generated text and its usage',
            headers: { 'x-request-id': { $ref: '#/components/headers/RequestId' } },
            content: json(ref('NativeChatResult')),
          },
          '400': error(
            'Invalid body: every bad field listed; or a guardrail blocked the request or the answer (GW_ERR_GUARDRAIL)',
            'Plain',
          ),
          '401': error('Missing or unknown API key', 'Plain'),
          '403': error('The key may not use this model', 'Plain'),
          '429': error(
            'A request, token, quota or budget limit of the key or its team reached (Retry-After until it has room)',
            'Plain',
          ),
          '502': error('The upstream failed or is not configured', 'Plain'),
          '504': error('The upstream did not answer in time', 'Plain'),
        },
      },
    },
    '/v1/models': {
      get: {
        summary: "The model catalog: each provider's latest alias ahead of its concrete model ids",
        security: [],
        responses: {
          '200': { description: 'The catalog', content: json(ref('ModelList')) },
          '429': error('Rate limit reached', 'Plain'),
        },
      },
    },
    '/v1/usage': {
      get: {
        summary:
          "The caller's own usage, summed per group (errors in the Chat Completions envelope; " +
          "limited per client address, not counted against the key's rpm)",
        security: [{ bearer: [] }, { apiKey: [] }],
        parameters: [
          { name: 'from', in: 'query', schema: { type: 'string', format: 'date' } },
          { name: 'to', in: 'query', schema: { type: 'string', format: 'date' } },
          { name: 'group_by', in: 'query', schema: { type: 'string', enum: ['model', 'day'] } },
        ],
        responses: {
          '200': { description: 'Usage rows', content: json(ref('UsageList')) },
          '400': error('Invalid query', 'Completions'),
          '401': error('Missing or unknown API key', 'Completions'),
          '429': error('Too many requests from this client address, or too many wrong keys', 'Completions'),
          '503': error('The usage store is unreachable', 'Completions'),
        },
      },
    },
    '/healthz': {
      get: {
        summary: 'Liveness',
        security: [],
        responses: {
          '200': {
            description: 'The process answers',
            content: json({ type: 'object', required: ['status'], properties: { status: { const: 'ok' } } }),
          },
        },
      },
    },
    '/readyz': {
      get: {
        summary: 'Readiness: 503 while anything runs degraded or the gateway drains',
        security: [],
        parameters: [
          {
            name: 'degraded',
            in: 'query',
            required: false,
            description:
              '`ready`: 200 while degraded too (503 only while draining), for orchestrators that take unready replicas out of service',
            schema: { type: 'string', enum: ['ready'] },
          },
        ],
        responses: {
          '200': { description: 'Ready', content: json(ref('Readiness')) },
          '503': { description: 'Degraded or shutting down', content: json(ref('Readiness')) },
        },
      },
    },
    '/metrics': {
      get: {
        summary: 'Prometheus metrics (unless METRICS_PORT serves them elsewhere)',
        security: [],
        responses: {
          '200': { description: 'Prometheus text format', content: { 'text/plain': { schema: { type: 'string' } } } },
        },
      },
    },
    ...KEY_PATHS,
    ...TEAM_PATHS,
    ...GROUP_PATHS,
    ...CACHE_PATHS,
    ...MANAGEMENT_PATHS,
    ...GUARDRAIL_ACTION_PATHS,
    ...ADMIN_READ_PATHS,
    ...ALERT_PATHS,
    '/openapi.json': {
      get: {
        summary: 'This document',
        security: [],
        responses: { '200': { description: 'OpenAPI 3.1', content: json({ type: 'object' }) } },
      },
    },
  },
  components: {
    securitySchemes: {
      bearer: { type: 'http', scheme: 'bearer', description: 'A gateway API key (`sk-…`)' },
      apiKey: {
        type: 'apiKey',
        in: 'header',
        name: 'x-api-key',
        description: 'A gateway API key, as Anthropic-style clients send it',
      },
      adminToken: {
        type: 'http',
        scheme: 'bearer',
        description:
          'GATEWAY_ADMIN_TOKEN (the break-glass admin, unless access.adminToken is false) or a service token (`gwt_…`) acting with its role. ' +
          "The admin API answers 404 with neither the admin token nor single sign-on configured. The account page's API serves " +
          'the same /admin routes at /account/api, behind its session cookie and CSRF token',
      },
    },
    parameters: {
      RequestId: {
        name: 'x-request-id',
        in: 'header',
        required: false,
        description: 'Kept when 1–128 characters of [A-Za-z0-9._:-]; otherwise one is generated',
        schema: { type: 'string' },
      },
    },
    headers: {
      RequestId: {
        description: 'The request id, on every answer',
        schema: { type: 'string', pattern: '^[A-Za-z0-9._:-]{1,128}$' },
      },
    },
    schemas: {
      ...REQUEST_COMPONENTS,
      ...MANAGEMENT_SCHEMAS,
      ...GROUP_SCHEMAS,
      ...ALERT_SCHEMAS,
      NativeChatResult: {
        type: 'object',
        required: ['id', 'model', 'result', 'usage'],
        properties: {
          id: { type: 'string' },
          model: { type: 'string' },
          result: { type: 'object', required: ['text'], properties: { text: { type: 'string' } } },
          usage: {
            type: 'object',
            required: ['input_tokens', 'output_tokens', 'total_tokens', 'cached_tokens', 'charged_tokens'],
            properties: Object.fromEntries(
              ['input_tokens', 'output_tokens', 'total_tokens', 'cached_tokens', 'charged_tokens'].map((name) => [
                name,
                { type: 'integer', minimum: 0 },
              ]),
            ),
          },
        },
      },
      NewTeam: newNamedRecord(TEAM_SETTINGS),
      TeamChanges: {
        type: 'object',
        additionalProperties: false,
        properties: nullableFields(TEAM_SETTINGS),
      },
      Team: {
        type: 'object',
        required: ['name', 'created_at', ...TEAM_FIELDS],
        properties: {
          name: { type: 'string' },
          created_at: { type: 'string', description: 'ISO 8601 date-time' },
          ...nullableFields(TEAM_SETTINGS),
        },
      },
      NewKey: {
        type: 'object',
        required: ['name'],
        additionalProperties: false,
        properties: { name: keyName, ...KEY_SETTINGS },
      },
      KeyChanges: {
        type: 'object',
        minProperties: 1,
        additionalProperties: false,
        properties: {
          name: keyName,
          ...nullableFields(KEY_SETTINGS),
        },
      },
      Key: {
        type: 'object',
        required: [
          'id',
          'name',
          'status',
          'created_at',
          'expires_at',
          'revoked',
          'models',
          'rpm',
          'concurrency',
          'quota',
          'tpm',
          'budget',
          'team',
          'group',
          'cache',
          'guardrails',
          'end_user',
          'alerts',
        ],
        properties: {
          id: { type: 'string', pattern: '^(key|static)_' },
          name: { type: 'string' },
          status: { enum: ['active', 'revoked', 'expired'] },
          created_at: { type: 'string', description: 'ISO 8601 date-time' },
          revoked: { type: 'boolean' },
          ...nullableFields(KEY_SETTINGS),
        },
      },
      CreatedKey: {
        allOf: [
          ref('Key'),
          {
            type: 'object',
            required: ['key'],
            properties: { key: { type: 'string', pattern: '^sk-', description: 'The key itself, shown this once' } },
          },
        ],
      },
      LimitOwner: {
        type: 'object',
        description:
          "A key (`id`, `name`, `status`, `team`) or a team (`name`, `key_ids`, `cache`): its limits as configured, and `use`, one entry per request, token or money limit (a key always has a request limit: its own `rpm` or the gateway's default; a team only when it has an `rpm`)",
        required: ['name', 'rpm', 'tpm', 'quota', 'budget', 'use'],
        properties: {
          name: { type: 'string' },
          cache: { type: ['boolean', 'null'], description: "A team's response cache setting as set; null when unset" },
          use: {
            type: 'array',
            items: {
              type: 'object',
              required: ['kind', 'period', 'unit', 'limit', 'used', 'remaining', 'resets_at'],
              properties: {
                kind: { enum: ['rpm', 'tpm', 'quota', 'budget'] },
                period: { enum: ['minute', 'day', 'month'] },
                unit: { enum: ['requests', 'tokens', 'usd'] },
                limit: { type: 'number' },
                used: { type: ['number', 'null'] },
                remaining: { type: ['number', 'null'] },
                resets_at: { type: 'string', format: 'date-time' },
              },
            },
          },
        },
      },
      ModelList: {
        type: 'object',
        required: ['data'],
        properties: {
          object: { const: 'list' },
          data: {
            type: 'array',
            items: {
              type: 'object',
              required: ['id'],
              properties: {
                id: { type: 'string' },
                routes: {
                  description:
                    "Only on a model with a route its plugin adapts: each path it serves and how, 'adapted' " +
                    "(the vendor's own format mapped), 'forwarded' (byte for byte) or 'native' (/v1/chat)",
                  type: 'object',
                  additionalProperties: { enum: ['adapted', 'forwarded', 'native'] },
                },
              },
            },
          },
        },
      },
      UsageList: {
        type: 'object',
        required: ['object', 'data'],
        properties: { object: { const: 'list' }, data: { type: 'array', items: ref('UsageRow') } },
      },
      UsageRow: {
        description:
          'The sums of one group: its field is `model`, `day`, `key_id`, `team` (null: keys in no team) or `key_id` and ' +
          '`end_user`, as group_by asks',
        type: 'object',
        required: [...USAGE_COUNT_FIELDS],
        properties: {
          model: { type: 'string' },
          day: { type: 'string', format: 'date' },
          key_id: { type: 'string' },
          team: { type: ['string', 'null'] },
          end_user: {
            type: ['string', 'null'],
            description: 'group_by=end_user (with key_id): null for requests naming none',
          },
          ...Object.fromEntries(
            [
              'requests',
              'input_tokens',
              'output_tokens',
              'cached_tokens',
              'total_tokens',
              'charged_tokens',
              'cache_hits',
            ].map((name) => [name, { type: 'integer', minimum: 0 }]),
          ),
          cost_usd: { type: 'number', minimum: 0 },
          saved_usd: { type: 'number', minimum: 0 },
        },
      },
      Readiness: {
        type: 'object',
        required: ['status', 'config_version'],
        properties: {
          status: { enum: ['ok', 'degraded', 'shutting down'] },
          redis: { type: 'string' },
          rate_limits: { type: 'string' },
          usage: { type: 'string' },
          config_version: { type: 'string', pattern: '^[0-9a-f]{12}$' },
          config_error: {
            type: 'string',
            description: 'Why the last reload was refused; absent once a reload succeeds',
          },
        },
      },
      PlainError: {
        description: 'DetailError, or ValidationError when `errors` is present (spec §2.8)',
        type: 'object',
        required: ['detail'],
        properties: { detail: { type: 'string' }, errors: { type: 'array', items: { type: 'string' } } },
      },
      CompletionsError: {
        description: "The OpenAI-style envelope the OpenAI SDKs read, with the gateway's detail beside it",
        type: 'object',
        required: ['detail', 'error'],
        properties: {
          detail: { type: 'string' },
          errors: { type: 'array', items: { type: 'string' } },
          error: {
            type: 'object',
            required: ['message', 'type', 'param', 'code'],
            properties: {
              message: { type: 'string' },
              type: { type: 'string' },
              param: { type: ['string', 'null'] },
              code: { type: 'string' },
            },
          },
        },
      },
      MessagesError: {
        description: "The Anthropic-style envelope the Anthropic SDKs read, with the gateway's detail beside it",
        type: 'object',
        required: ['detail', 'type', 'error'],
        properties: {
          detail: { type: 'string' },
          errors: { type: 'array', items: { type: 'string' } },
          type: { const: 'error' },
          error: {
            type: 'object',
            required: ['type', 'message'],
            properties: { type: { type: 'string' }, message: { type: 'string' } },
          },
        },
      },
    },
  },
} as const;
