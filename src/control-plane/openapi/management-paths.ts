/**
 * The OpenAPI description of the management routes that came with roles and service tokens: who a
 * credential acts as, the canonical models, health, the usage CSV, service tokens and the audit log.
 * Each is served at `/admin` and, for the account page, at `/account/api`.
 */

import { ROLES } from '../../core/access.ts';
import { PERMISSIONS } from '../access/permissions.ts';
import { adminErrors, error, json, RECORD_NAME_PATTERN, ref } from './openapi-parts.ts';

const security = [{ adminToken: [] }];
const teamNameSchema = { type: 'string', pattern: RECORD_NAME_PATTERN };
const dateTime = { type: 'string', format: 'date-time' };
const list = (items: object) => ({
  type: 'object',
  required: ['object', 'data'],
  properties: { object: { const: 'list' }, data: { type: 'array', items } },
});
const storeDown = (what: string) =>
  error(`${what} cannot be read or written right now (Redis is unreachable)`, 'Plain');

/** How a principal proved who it is, as the audit log and `whoami` name it. */
const ACTOR_KINDS = ['user', 'service-token', 'admin-token', 'cli', 'config', 'gateway'];
/** What the role mapping and service tokens may hold: the permissions besides signing in. */
const HELD_PERMISSIONS = Object.keys(PERMISSIONS).filter((permission) => permission !== 'public');

const SERVICE_TOKEN_PROPERTIES = {
  id: { type: 'string', pattern: '^tok_[0-9a-f]{16}$', description: 'Public id, safe to show and log' },
  name: { type: 'string' },
  role: { enum: [...ROLES] },
  teams: {
    anyOf: [{ type: 'array', minItems: 1, items: teamNameSchema }, { type: 'null' }],
    description: "The role's teams; null: every team",
  },
  status: { enum: ['active', 'revoked', 'expired'] },
  created_at: dateTime,
  expires_at: dateTime,
  created_by: {
    type: 'string',
    description: "Who made it: the actor's kind and name or id (`user:alice@example.com`, `admin-token:admin-token`)",
  },
};
const SERVICE_TOKEN_REQUIRED = Object.keys(SERVICE_TOKEN_PROPERTIES);

const usageQuery = [
  { name: 'from', in: 'query', schema: { type: 'string', format: 'date' } },
  { name: 'to', in: 'query', schema: { type: 'string', format: 'date' } },
  { name: 'group_by', in: 'query', schema: { type: 'string', enum: ['model', 'day', 'key', 'team', 'end_user'] } },
  { name: 'key_id', in: 'query', schema: { type: 'string' } },
];
const CSV_COLUMNS =
  'requests,input_tokens,output_tokens,cached_tokens,total_tokens,charged_tokens,cost_usd,cache_hits,saved_usd';

const textFilter = (name: string, description: string) => ({
  name,
  in: 'query',
  required: false,
  description,
  schema: { type: 'string', minLength: 1 },
});
const AUDIT_QUERY = [
  textFilter('action', 'An action (`key.create`), or a family ending in a dot (`key.`: every key action)'),
  textFilter('actor', "An actor's id or name"),
  { name: 'outcome', in: 'query', required: false, schema: { enum: ['ok', 'refused'] } },
  textFilter('team', 'Records whose target belongs to this team'),
  textFilter('target', "A target's id: a key's or token's id, a team's name"),
  { name: 'via', in: 'query', required: false, schema: { enum: ['admin', 'account', 'cli', 'config', 'gateway'] } },
  {
    name: 'from',
    in: 'query',
    required: false,
    description: 'ISO 8601 date or date-time: records at or after it',
    schema: { type: 'string' },
  },
  {
    name: 'to',
    in: 'query',
    required: false,
    description: 'ISO 8601 date or date-time: records at or before it',
    schema: { type: 'string' },
  },
  {
    name: 'limit',
    in: 'query',
    required: false,
    description: 'Records per page (100 by default)',
    schema: { type: 'integer', minimum: 1, maximum: 1000 },
  },
  {
    name: 'before',
    in: 'query',
    required: false,
    description: "Records older than this `seq`: the previous page's `next_before`",
    schema: { type: 'integer', minimum: 1 },
  },
];

/** `/admin/whoami`, `/admin/models`, `/admin/health`, `/admin/usage.csv`, `/admin/tokens`, `/admin/audit`. */
export const MANAGEMENT_PATHS = {
  '/admin/whoami': {
    get: {
      summary:
        'Who the credential acts as, its roles, and where it holds each permission (every team, or the teams named)',
      security,
      responses: { '200': { description: 'The principal', content: json(ref('Principal')) }, ...adminErrors },
    },
  },
  '/admin/models': {
    get: {
      summary: "The canonical model ids (vendor/model) a key's `models` may name, sorted",
      security,
      responses: {
        '200': { description: 'The model ids', content: json(list({ type: 'string', pattern: '^[^/]+/.+$' })) },
        ...adminErrors,
      },
    },
  },
  '/admin/health': {
    get: {
      summary:
        "Readiness (as /readyz), each provider's upstream endpoints with their breakers (never a credential), and the aliases in force",
      security,
      responses: { '200': { description: 'Health', content: json(ref('Health')) }, ...adminErrors },
    },
  },
  '/admin/usage.csv': {
    get: {
      summary:
        'Usage as CSV (RFC 4180, CRLF line ends), grouped as GET /admin/usage groups it; keys in no team have an empty team',
      security,
      parameters: usageQuery,
      responses: {
        '200': {
          description:
            'A header line (the group, then the counters) and one line per group, as a download named for the query',
          headers: {
            'content-disposition': { schema: { type: 'string', pattern: '^attachment; filename="usage-by-' } },
          },
          content: {
            'text/csv': { schema: { type: 'string', pattern: `^(model|day|key_id|team),${CSV_COLUMNS}\r\n` } },
          },
        },
        '400': error('Invalid query', 'Plain'),
        '503': error('The usage store is unreachable', 'Plain'),
        ...adminErrors,
      },
    },
  },
  '/admin/tokens': {
    get: {
      summary: "The service tokens within the caller's role (never a token or its hash)",
      security,
      responses: {
        '200': { description: 'The tokens', content: json(list(ref('ServiceToken'))) },
        '503': storeDown('Service tokens'),
        ...adminErrors,
      },
    },
    post: {
      summary: 'Makes a service token: the token itself is in this answer only, never stored (only its SHA-256)',
      security,
      requestBody: { required: true, content: json(ref('NewServiceToken')) },
      responses: {
        '201': { description: 'The token, with `token` shown this once', content: json(ref('CreatedServiceToken')) },
        '400': error('Invalid body: every bad field listed', 'Plain'),
        '503': storeDown('Service tokens'),
        ...adminErrors,
        '403': error(
          "The caller's role may not make tokens, or not this role over these teams (a token never holds more than its maker)",
          'Plain',
        ),
      },
    },
  },
  '/admin/tokens/{id}': {
    delete: {
      summary: 'Revokes a service token: refused at once on every instance',
      security,
      parameters: [{ name: 'id', in: 'path', required: true, schema: { type: 'string' } }],
      responses: {
        '200': {
          description: 'Revoked',
          content: json({
            type: 'object',
            required: ['id', 'revoked'],
            properties: { id: { type: 'string' }, revoked: { const: true } },
          }),
        },
        '404': error('No token with that id', 'Plain'),
        '503': storeDown('Service tokens'),
        ...adminErrors,
        '403': error(
          "The caller's role may not revoke tokens, or not this one (its role is beyond the caller's)",
          'Plain',
        ),
      },
    },
  },
  '/admin/audit': {
    get: {
      summary: "The audit log, newest first, filtered and paged; a team role reads its teams' records",
      security,
      parameters: AUDIT_QUERY,
      responses: {
        '200': {
          description: 'A page of records; `next_before` asks for the next (older) page, null on the last',
          content: json({
            type: 'object',
            required: ['object', 'data', 'next_before'],
            additionalProperties: false,
            properties: {
              object: { const: 'list' },
              data: { type: 'array', maxItems: 1000, items: ref('AuditRecord') },
              next_before: { type: ['integer', 'null'], minimum: 1 },
            },
          }),
        },
        '400': error(
          'An unknown parameter, one given twice or empty, a date that does not parse, limit or before out of range: every problem listed',
          'Plain',
        ),
        '503': storeDown('The audit log'),
        ...adminErrors,
      },
    },
  },
};

const actor = {
  type: 'object',
  required: ['kind', 'id', 'roles'],
  additionalProperties: false,
  properties: {
    kind: { enum: ACTOR_KINDS },
    id: {
      type: 'string',
      description: "A user's issuer and subject, a token's id, `admin-token`, the CLI's user and host, `config`",
    },
    name: { type: 'string', description: "A person's e-mail or name, a token's name" },
    roles: {
      type: 'array',
      items: { type: 'string' },
      description: 'The roles held then: `admin`, `team-admin:blue,green`, `viewer`',
    },
  },
};
const hash = { type: 'string', pattern: '^[0-9a-f]{64}$' };

/** The components the paths above refer to. */
export const MANAGEMENT_SCHEMAS = {
  Principal: {
    type: 'object',
    required: ['actor', 'roles', 'permissions'],
    additionalProperties: false,
    properties: {
      actor: {
        type: 'object',
        required: ['kind', 'id', 'name'],
        additionalProperties: false,
        properties: { kind: { enum: ACTOR_KINDS }, id: { type: 'string' }, name: { type: ['string', 'null'] } },
      },
      roles: { type: 'array', items: { type: 'string' } },
      permissions: {
        type: 'object',
        description: 'Each permission held: `all` (every team) or the team names it is held over',
        propertyNames: { enum: HELD_PERMISSIONS },
        additionalProperties: { anyOf: [{ const: 'all' }, { type: 'array', items: teamNameSchema }] },
      },
    },
  },
  Health: {
    type: 'object',
    required: ['readiness', 'providers', 'aliases'],
    properties: {
      readiness: ref('Readiness'),
      providers: {
        type: 'array',
        items: {
          type: 'object',
          required: ['vendor', 'env_prefix', 'name', 'endpoint', 'status', 'consecutive_failures', 'resting_until'],
          additionalProperties: false,
          properties: {
            vendor: { type: 'string' },
            env_prefix: {
              type: 'string',
              description: 'What an operator sets: `<PREFIX>_BASE_URL`, `<PREFIX>_API_KEY`',
            },
            name: { type: ['string', 'null'] },
            endpoint: {
              type: ['string', 'null'],
              description: "The upstream's origin and version prefix; never its credential",
            },
            status: { enum: ['up', 'resting', 'trial', 'not configured'] },
            consecutive_failures: { type: 'integer', minimum: 0 },
            resting_until: { anyOf: [dateTime, { type: 'null' }] },
          },
        },
      },
      aliases: {
        type: 'array',
        items: {
          type: 'object',
          required: ['alias', 'vendor', 'target', 'routes'],
          additionalProperties: false,
          properties: {
            alias: { type: 'string' },
            vendor: { type: 'string' },
            target: { type: 'string' },
            routes: { type: 'array', items: { type: 'string' } },
          },
        },
      },
    },
  },
  NewServiceToken: {
    type: 'object',
    required: ['name', 'role'],
    additionalProperties: false,
    properties: {
      name: { type: 'string', minLength: 1, maxLength: 200 },
      role: { enum: [...ROLES] },
      teams: {
        type: 'array',
        minItems: 1,
        items: teamNameSchema,
        description: 'The teams of a team-admin (required) or a viewer (absent: every team); never for admin',
      },
      expires_at: { ...dateTime, description: 'In the future, at most 366 days ahead; absent: 90 days from now' },
    },
    allOf: [
      { if: { required: ['role'], properties: { role: { const: 'admin' } } }, then: { not: { required: ['teams'] } } },
      { if: { required: ['role'], properties: { role: { const: 'team-admin' } } }, then: { required: ['teams'] } },
    ],
  },
  ServiceToken: {
    type: 'object',
    required: SERVICE_TOKEN_REQUIRED,
    additionalProperties: false,
    properties: SERVICE_TOKEN_PROPERTIES,
  },
  CreatedServiceToken: {
    type: 'object',
    required: [...SERVICE_TOKEN_REQUIRED, 'token'],
    additionalProperties: false,
    properties: {
      ...SERVICE_TOKEN_PROPERTIES,
      token: { type: 'string', pattern: '^gwt_[A-Za-z0-9_-]{43}$', description: 'The token itself, shown this once' },
    },
  },
  AuditRecord: {
    type: 'object',
    description: "One thing done on the control plane: ids, names and the API's views, never a secret or a hash of one",
    required: [
      'seq',
      'time',
      'actor',
      'via',
      'address',
      'action',
      'outcome',
      'target',
      'before',
      'after',
      'reason',
      'prev',
      'hash',
    ],
    additionalProperties: false,
    properties: {
      seq: { type: 'integer', minimum: 1 },
      time: dateTime,
      actor: { anyOf: [actor, { type: 'null' }], description: 'null: a refused credential (no one could be told)' },
      via: {
        enum: ['admin', 'account', 'cli', 'config', 'gateway'],
        description: 'gateway: the gateway itself (a limit alert)',
      },
      address: { type: ['string', 'null'], description: 'The client address; null for the CLI and reloads' },
      action: {
        type: 'string',
        description:
          '`key.create`, `team.update`, `token.revoke`, `cache.clear`, `config.reload`, `session.sign-in`, …; a refusal names the permission asked for',
      },
      outcome: { enum: ['ok', 'refused'] },
      target: {
        type: 'object',
        required: ['type'],
        additionalProperties: false,
        properties: {
          type: { enum: ['key', 'team', 'group', 'token', 'cache', 'config', 'session', 'route', 'limit'] },
          id: { type: 'string' },
          team: { type: ['string', 'null'] },
        },
      },
      before: { description: 'The target as the API showed it before the change; null for a creation or a refusal' },
      after: { description: 'The target as the API shows it after the change; null for a deletion or a refusal' },
      reason: { type: ['string', 'null'], description: 'Why it was refused' },
      prev: { ...hash, description: 'The hash of the record before (64 zeros for the first)' },
      hash: { ...hash, description: 'SHA-256 of this record without its hash, `prev` included' },
    },
  },
};
