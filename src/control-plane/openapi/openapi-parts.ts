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
