import type * as yup from 'yup';
import { readShape, type Shape } from '../../data-plane/routes/request-shapes.ts';

/** A JSON Schema (2020-12, OpenAPI 3.1's dialect) document or subschema. */
export type JsonSchema = { readonly [keyword: string]: unknown };

/**
 * The JSON Schema of a shape read from a yup schema: for a JSON body it accepts what the schema
 * (strict) accepts. An object lists its fields and stays open to others unless its meta says `closed`.
 */
export function jsonSchemaOfShape(shape: Shape): JsonSchema {
  const type = (...types: string[]) => {
    const all = shape.nullable ? [...types, 'null'] : types;
    return { type: all.length === 1 ? all[0] : all };
  };
  let schema: Record<string, unknown>;
  switch (shape.kind) {
    case 'any':
      schema = shape.nullable ? {} : { not: { type: 'null' } };
      break;
    case 'types':
      schema = type(...shape.types);
      break;
    case 'string':
      schema = { ...type('string'), ...(shape.minLength ? { minLength: shape.minLength } : {}) };
      break;
    case 'number': {
      const { minimum, exclusiveMinimum, maximum, exclusiveMaximum } = shape;
      const bounds = Object.entries({ minimum, exclusiveMinimum, maximum, exclusiveMaximum }).filter(
        ([, bound]) => bound !== undefined,
      );
      schema = { ...type(shape.integer ? 'integer' : 'number'), ...Object.fromEntries(bounds) };
      break;
    }
    case 'boolean':
      schema = type('boolean');
      break;
    case 'array':
      schema = {
        ...type('array'),
        ...(shape.minItems ? { minItems: shape.minItems } : {}),
        ...(shape.maxItems !== undefined ? { maxItems: shape.maxItems } : {}),
        ...(shape.items ? { items: jsonSchemaOfShape(shape.items) } : {}),
      };
      break;
    case 'object': {
      const required = Object.entries(shape.fields)
        .filter(([, field]) => !field.optional)
        .map(([key]) => key);
      schema = {
        ...type('object'),
        ...(required.length ? { required } : {}),
        ...(shape.closed ? { additionalProperties: false } : {}),
        properties: Object.fromEntries(
          Object.entries(shape.fields).map(([key, field]) => [key, jsonSchemaOfShape(field)]),
        ),
      };
      break;
    }
  }
  if (shape.enum) schema.enum = shape.nullable ? [...shape.enum, null] : [...shape.enum];
  if (shape.description !== undefined) schema.description = shape.description;
  return schema;
}

/** The OpenAPI request body schema derived from a route's yup schema. */
export const requestJsonSchema = (schema: yup.AnyObjectSchema, name: string): JsonSchema =>
  jsonSchemaOfShape(readShape(schema, name));
