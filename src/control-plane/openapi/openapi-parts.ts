/** What the OpenAPI document's paths share: schema references, JSON content and error answers. */

export const ref = (name: string) => ({ $ref: `#/components/schemas/${name}` });
export const json = (schema: object) => ({ 'application/json': { schema } });

/** An error answer in the envelope the path uses. */
export const error = (description: string, envelope: 'Completions' | 'Messages' | 'Plain') => ({
  description,
  content: json(ref(`${envelope}Error`)),
});

/**
 * The answers every management route may give before it runs: no credential, a role without the
 * permission, too many wrong credentials.
 */
export const adminErrors = {
  '401': error('Missing, wrong, expired or revoked admin or service token', 'Plain'),
  '403': error(
    "The credential's role may not do this, or not on this target's team (the detail names the permission); kept in the audit log",
    'Plain',
  ),
  '429': error('Too many wrong credentials from this address', 'Plain'),
};

/** The name of a team or a group. */
export const RECORD_NAME_PATTERN = '^[A-Za-z0-9._-]{1,64}$';

/** The `{name}` path parameter of a team's or a group's route. */
export const nameParameter = {
  name: 'name',
  in: 'path',
  required: true,
  schema: { type: 'string', pattern: RECORD_NAME_PATTERN },
};

/** A list answer: `{"object": "list", "data": [...]}` of the schema named. */
export const listOf = (description: string, schema: string) => ({
  description,
  content: json({
    type: 'object',
    required: ['object', 'data'],
    properties: { object: { const: 'list' }, data: { type: 'array', items: ref(schema) } },
  }),
});

/** The answer to deleting a team or a group by its name. */
export const deletedByName = {
  description: 'Deleted',
  content: json({
    type: 'object',
    required: ['name', 'deleted'],
    properties: { name: { type: 'string' }, deleted: { const: true } },
  }),
};

/** The body creating a team or a group: its name and its settings. */
export const newNamedRecord = (settings: object) => ({
  type: 'object',
  required: ['name'],
  additionalProperties: false,
  properties: { name: { type: 'string', pattern: RECORD_NAME_PATTERN }, ...settings },
});
