/** The OpenAPI description of the limit alert routes, served at `/admin` and at `/account/api`. */

import { ALERT_DELIVERIES_KEPT } from '../../stores/alerts/alert-log.ts';
import { adminErrors, error, json, ref } from './openapi-parts.ts';

const security = [{ adminToken: [] }];
const dateTime = { type: 'string', format: 'date-time' };
const list = (items: object) => ({
  type: 'object',
  required: ['object', 'data'],
  properties: { object: { const: 'list' }, data: { type: 'array', items } },
});
const storeDown = error('Limit alerts cannot be read right now (Redis is unreachable)', 'Plain');

/** `alerts` of keys and teams: the percents at which their alerts fire. */
export const ALERT_THRESHOLDS = {
  type: 'array',
  items: { type: 'integer', minimum: 1, maximum: 100 },
  uniqueItems: true,
  description:
    'Percents of the money budgets and token quotas (day and month) at which alerts fire, in ascending order, each once; ' +
    "[] for none; absent: the gateway's (GATEWAY_LIMIT_ALERTS, default 50, 80, 100)",
};

/** `GET /admin/alerts` and `GET /admin/alerts/deliveries`. */
export const ALERT_PATHS = {
  '/admin/alerts': {
    get: {
      summary:
        "Each limit alert's last firing (an alert: a threshold of a key's or team's budget or quota of a day or month), newest first; a team role reads its teams' alerts",
      security,
      responses: {
        '200': { description: 'The last firings', content: json(list(ref('AlertFiring'))) },
        '400': error('A query parameter (this route takes none)', 'Plain'),
        '503': storeDown,
        ...adminErrors,
      },
    },
  },
  '/admin/alerts/deliveries': {
    get: {
      summary: `The newest attempts to deliver alerts to the webhook (the newest ${ALERT_DELIVERIES_KEPT} kept), newest first: never its URL, its secret or what it answered`,
      security,
      parameters: [
        {
          name: 'limit',
          in: 'query',
          required: false,
          description: 'How many attempts (100 by default)',
          schema: { type: 'integer', minimum: 1, maximum: ALERT_DELIVERIES_KEPT },
        },
      ],
      responses: {
        '200': { description: 'The attempts', content: json(list(ref('AlertDelivery'))) },
        '400': error('An unknown parameter, or limit out of range', 'Plain'),
        '503': storeDown,
        ...adminErrors,
      },
    },
  },
};

/** The components the paths above refer to. */
export const ALERT_SCHEMAS = {
  AlertFiring: {
    type: 'object',
    description: "One firing: also the body of its webhook, which adds type: 'limit.threshold' and leaves team out",
    required: [
      'id',
      'scope',
      'owner',
      'team',
      'kind',
      'period',
      'threshold',
      'used',
      'limit',
      'unit',
      'window_end',
      'fired_at',
    ],
    additionalProperties: false,
    properties: {
      id: { type: 'string', pattern: '^alrt_[0-9a-f]{16}$' },
      scope: { type: 'string', description: 'key, team (or group)' },
      owner: { type: 'string', description: "The key's id, the team's name" },
      team: { type: ['string', 'null'], description: 'The team the owner is or belongs to' },
      kind: { enum: ['budget', 'quota'] },
      period: { enum: ['day', 'month'] },
      threshold: { type: 'integer', minimum: 1, maximum: 100, description: 'The percent reached' },
      used: {
        type: 'number',
        description: 'Use when it fired, reservations of requests in flight included (USD or charged tokens)',
      },
      limit: { type: 'number' },
      unit: { enum: ['usd', 'tokens'] },
      window_end: { ...dateTime, description: 'When the UTC day or month ends' },
      fired_at: dateTime,
    },
  },
  AlertDelivery: {
    type: 'object',
    required: ['delivery', 'alert', 'owner', 'team', 'attempt', 'at', 'outcome', 'status', 'error', 'next_attempt_at'],
    additionalProperties: false,
    properties: {
      delivery: {
        type: 'string',
        pattern: '^dlv_[0-9a-f]{16}$',
        description: 'x-gateway-delivery: the same on every attempt',
      },
      alert: { type: 'string', description: "The firing's id" },
      owner: { type: 'string' },
      team: { type: ['string', 'null'] },
      attempt: { type: 'integer', minimum: 1 },
      at: dateTime,
      outcome: {
        enum: ['delivered', 'retrying', 'failed'],
        description: 'retrying: failed, another attempt follows; failed: no attempt is left',
      },
      status: { type: ['integer', 'null'], description: "The receiver's status, when it answered" },
      error: {
        type: ['string', 'null'],
        description: 'Why it failed without a status: connection refused, timed out, …',
      },
      next_attempt_at: { type: ['string', 'null'], format: 'date-time' },
    },
  },
};
