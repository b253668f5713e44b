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

/** `group` of a key or a team. */
export const GROUP_FIELD = {
  type: 'string',
  pattern: RECORD_NAME_PATTERN,
  description: "An existing budget group the owner's requests draw from as well (a key's group over its team's)",
};

/** A group's limits and alert thresholds. */
const GROUP_SETTINGS = {
  tpm: positiveInteger,
  quota: TOKEN_QUOTA,
  budget: MONEY_BUDGET,
  alerts: {
    type: 'array',
    items: { type: 'integer', minimum: 1, maximum: 100 },
    description:
      "Percents of the group's budgets and quotas at which alerts fire, ascending, each once; [] for none; absent: the gateway's",
  },
};

const useEntry = {
  type: 'object',
  required: ['kind', 'period', 'unit', 'limit', 'used', 'remaining', 'resets_at'],
  properties: {
    kind: { enum: ['tpm', 'quota', 'budget'] },
    period: { enum: ['minute', 'day', 'month'] },
    unit: { enum: ['tokens', 'usd'] },
    limit: { type: 'number' },
    used: { type: ['number', 'null'] },
    remaining: { type: ['number', 'null'] },
    resets_at: { type: 'string', format: 'date-time' },
  },
};

/** The budget group schemas. */
export const GROUP_SCHEMAS = {
  NewGroup: newNamedRecord(GROUP_SETTINGS),
  GroupChanges: {
    type: 'object',
    minProperties: 1,
    additionalProperties: false,
    properties: nullableFields(GROUP_SETTINGS),
  },
  Group: {
    type: 'object',
    required: ['name', 'created_at', 'tpm', 'quota', 'budget', 'alerts', 'members', 'metered', 'use'],
    properties: {
      name: { type: 'string' },
      created_at: { type: 'string', description: 'ISO 8601 date-time' },
      ...nullableFields(GROUP_SETTINGS),
      members: {
        type: 'object',
        required: ['teams', 'keys'],
        description:
          'Who names the group: teams (their keys draw from it unless a key names a group of its own) and keys (not revoked)',
        properties: {
          teams: { type: 'array', items: { type: 'string' } },
          keys: {
            type: 'array',
            items: {
              type: 'object',
              required: ['id', 'name', 'team'],
              properties: { id: { type: 'string' }, name: { type: 'string' }, team: { type: ['string', 'null'] } },
            },
          },
        },
      },
      metered: {
        type: 'boolean',
        description: 'False when no limit counters are read: `used` and `remaining` are null',
      },
      use: {
        type: 'array',
        items: useEntry,
        description: 'Each token and money limit with its use in the window open now',
      },
    },
  },
};

/** The admin API's budget group routes (`/admin/groups`). */
export const GROUP_PATHS = {
  '/admin/groups': {
    post: {
      summary:
        'Creates a budget group: a named budget (tokens per minute, token quotas, money per day and month) teams and keys draw from together',
      security: [{ adminToken: [] }],
      requestBody: { required: true, content: json(ref('NewGroup')) },
      responses: {
        '201': { description: 'The group', content: json(ref('Group')) },
        '400': error('Invalid body: every bad field listed', 'Plain'),
        '409': error('A group of that name exists', 'Plain'),
        ...adminErrors,
      },
    },
    get: {
      summary: 'Every budget group with its members and use (a team role: the groups its teams draw from)',
      security: [{ adminToken: [] }],
      responses: {
        '200': listOf('The groups', 'Group'),
        ...adminErrors,
      },
    },
  },
  '/admin/groups/{name}': {
    get: {
      summary: 'One budget group with its members and its use',
      security: [{ adminToken: [] }],
      parameters: [nameParameter],
      responses: {
        '200': { description: 'The group', content: json(ref('Group')) },
        '404': error('No group of that name', 'Plain'),
        ...adminErrors,
      },
    },
    patch: {
      summary:
        "Changes a group's limits and alert thresholds: each set (an object replaces the whole limit), null to remove it, absent to keep it",
      security: [{ adminToken: [] }],
      parameters: [nameParameter],
      requestBody: { required: true, content: json(ref('GroupChanges')) },
      responses: {
        '200': { description: 'The group as changed', content: json(ref('Group')) },
        '400': error('Invalid or empty body: every bad field listed', 'Plain'),
        '404': error('No group of that name', 'Plain'),
        ...adminErrors,
      },
    },
    delete: {
      summary: 'Deletes a group no team and no key names any more',
      security: [{ adminToken: [] }],
      parameters: [nameParameter],
      responses: {
        '200': deletedByName,
        '404': error('No group of that name', 'Plain'),
        '409': error('Teams or keys that are not revoked name the group; the detail names them', 'Plain'),
        ...adminErrors,
      },
    },
  },
};
