type Schema = Record<string, unknown>;

const isSchema = (value: unknown): value is Schema =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

/** The schema a local `$ref` (`#/$defs/x`, `#/definitions/x`, `#`) points to inside the root schema. */
function resolveRef(ref: string, root: Schema): Schema | undefined {
  if (!ref.startsWith('#')) return undefined;
  let target: unknown = root;
  for (const part of ref.slice(1).split('/').filter(Boolean)) {
    const key = decodeURIComponent(part).replaceAll('~1', '/').replaceAll('~0', '~');
    target = isSchema(target) ? target[key] : undefined;
  }
  return isSchema(target) ? target : undefined;
}

function stringOf(schema: Schema): string {
  const formats: Record<string, string> = {
    'date-time': '2026-01-01T00:00:00Z',
    date: '2026-01-01',
    time: '00:00:00Z',
    email: 'mock@example.com',
    uri: 'https://example.com/',
    uuid: '00000000-0000-4000-8000-000000000000',
  };
  const value = (typeof schema.format === 'string' && formats[schema.format]) || 'mock';
  const min = typeof schema.minLength === 'number' ? schema.minLength : 0;
  const max = typeof schema.maxLength === 'number' ? schema.maxLength : Infinity;
  return value.padEnd(min, 'x').slice(0, Math.max(min, Math.min(max, value.length)));
}

function numberOf(schema: Schema, integer: boolean): number {
  const low =
    typeof schema.minimum === 'number'
      ? schema.minimum
      : typeof schema.exclusiveMinimum === 'number'
        ? schema.exclusiveMinimum + (integer ? 1 : 0.5)
        : undefined;
  const high =
    typeof schema.maximum === 'number'
      ? schema.maximum
      : typeof schema.exclusiveMaximum === 'number'
        ? schema.exclusiveMaximum - (integer ? 1 : 0.5)
        : undefined;
  // 1 when the bounds allow it (zod's integers carry the safe-integer range as bounds), else the nearest bound.
  const value = Math.min(Math.max(1, low ?? -Infinity), high ?? Infinity);
  return integer ? Math.ceil(value) : value;
}

/**
 * A small instance that the JSON schema accepts, as a model asked for structured output would answer:
 * `const`, `enum` (first value), `anyOf`/`oneOf` (first branch), `allOf` (merged), local `$ref`,
 * objects (every declared property, in declared order), arrays (`minItems` items, at least one unless
 * `maxItems` is 0), strings (`minLength`/`maxLength`, common formats), numbers and integers (bounds),
 * booleans and null. Good enough for the schemas clients send, not a full JSON Schema solver.
 */
export function schemaInstance(schema: unknown, root: unknown = schema, depth = 0): unknown {
  if (!isSchema(schema) || depth > 16) return {};
  const rootSchema = isSchema(root) ? root : schema;
  if (typeof schema.$ref === 'string')
    return schemaInstance(resolveRef(schema.$ref, rootSchema), rootSchema, depth + 1);
  if ('const' in schema) return schema.const;
  if (Array.isArray(schema.enum) && schema.enum.length > 0) return schema.enum[0];
  for (const key of ['anyOf', 'oneOf'] as const) {
    const branches = schema[key];
    if (Array.isArray(branches) && branches.length > 0) {
      const branch = branches.find((entry) => !(isSchema(entry) && entry.type === 'null')) ?? branches[0];
      return schemaInstance(branch, rootSchema, depth + 1);
    }
  }
  if (Array.isArray(schema.allOf)) {
    const merged: Schema = { ...schema, allOf: undefined, properties: {} };
    for (const part of schema.allOf)
      if (isSchema(part))
        Object.assign(merged, part, {
          properties: { ...(merged.properties as Schema), ...(isSchema(part.properties) ? part.properties : {}) },
        });
    if (isSchema(schema.properties)) Object.assign(merged.properties as Schema, schema.properties);
    return schemaInstance(merged, rootSchema, depth + 1);
  }
  const types = Array.isArray(schema.type) ? schema.type : [schema.type];
  const type =
    types.find((entry) => entry !== 'null') ??
    (types.includes('null')
      ? 'null'
      : isSchema(schema.properties)
        ? 'object'
        : isSchema(schema.items)
          ? 'array'
          : 'object');
  switch (type) {
    case 'string':
      return stringOf(schema);
    case 'integer':
      return numberOf(schema, true);
    case 'number':
      return numberOf(schema, false);
    case 'boolean':
      return true;
    case 'null':
      return null;
    case 'array': {
      const max = typeof schema.maxItems === 'number' ? schema.maxItems : Infinity;
      const count = Math.min(max, Math.max(1, typeof schema.minItems === 'number' ? schema.minItems : 1));
      if (Array.isArray(schema.prefixItems))
        return schema.prefixItems
          .slice(0, Math.max(count, schema.prefixItems.length))
          .map((item) => schemaInstance(item, rootSchema, depth + 1));
      return Array.from({ length: count }, () => schemaInstance(schema.items ?? {}, rootSchema, depth + 1));
    }
    default: {
      const properties = isSchema(schema.properties) ? schema.properties : {};
      return Object.fromEntries(
        Object.entries(properties).map(([name, property]) => [name, schemaInstance(property, rootSchema, depth + 1)]),
      );
    }
  }
}
