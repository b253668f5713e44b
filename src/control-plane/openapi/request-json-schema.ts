import type * as yup from 'yup';
import { readShape, type Shape } from '../../data-plane/routes/request-shapes.ts';

/** A JSON Schema (2020-12, OpenAPI 3.1's dialect) document or subschema. */
export type JsonSchema = { readonly [keyword: string]: unknown };

/**
 * The JSON Schema of a shape read from a yup schema: for a JSON body it accepts what the schema
 * (strict) accepts. An object lists its fields and stays open to others unless its meta says `closed`.
 */
export function jsonSchemaOfShape(shape: Shape): JsonSchema {
  const schema = keywordsOfKind(shape);
  if (shape.enum) schema.enum = shape.nullable ? [...shape.enum, null] : [...shape.enum];
  if (shape.description !== undefined) schema.description = shape.description;
  return schema;
}

type ShapeOf<K extends Shape['kind']> = Extract<Shape, { kind: K }>;

/** The `type` keyword: the given types, and `null` too when the shape is nullable. */
function typeKeyword(shape: Shape, ...types: string[]): { type: unknown } {
  const all = shape.nullable ? [...types, 'null'] : types;
  return { type: all.length === 1 ? all[0] : all };
}

/** The keywords that follow from the shape's kind: its type and the bounds of that type. */
function keywordsOfKind(shape: Shape): Record<string, unknown> {
  switch (shape.kind) {
    case 'any':
      return shape.nullable ? {} : { not: { type: 'null' } };
    case 'types':
      return typeKeyword(shape, ...shape.types);
    case 'string':
      return { ...typeKeyword(shape, 'string'), ...(shape.minLength ? { minLength: shape.minLength } : {}) };
    case 'number':
      return numberKeywords(shape);
    case 'boolean':
      return typeKeyword(shape, 'boolean');
    case 'array':
      return arrayKeywords(shape);
    case 'object':
      return objectKeywords(shape);
  }
}

function numberKeywords(shape: ShapeOf<'number'>): Record<string, unknown> {
  const { minimum, exclusiveMinimum, maximum, exclusiveMaximum } = shape;
  const bounds = Object.entries({ minimum, exclusiveMinimum, maximum, exclusiveMaximum }).filter(
    ([, bound]) => bound !== undefined,
  );
  return { ...typeKeyword(shape, shape.integer ? 'integer' : 'number'), ...Object.fromEntries(bounds) };
}

function arrayKeywords(shape: ShapeOf<'array'>): Record<string, unknown> {
  return {
    ...typeKeyword(shape, 'array'),
    ...(shape.minItems ? { minItems: shape.minItems } : {}),
    ...(shape.maxItems !== undefined ? { maxItems: shape.maxItems } : {}),
    ...(shape.items ? { items: jsonSchemaOfShape(shape.items) } : {}),
  };
}

function objectKeywords(shape: ShapeOf<'object'>): Record<string, unknown> {
  const required = Object.entries(shape.fields)
    .filter(([, field]) => !field.optional)
    .map(([key]) => key);
  return {
    ...typeKeyword(shape, 'object'),
    ...(required.length ? { required } : {}),
    ...(shape.closed ? { additionalProperties: false } : {}),
    properties: Object.fromEntries(Object.entries(shape.fields).map(([key, field]) => [key, jsonSchemaOfShape(field)])),
  };
}

/** The OpenAPI request body schema derived from a route's yup schema. */
export const requestJsonSchema = (schema: yup.AnyObjectSchema, name: string): JsonSchema =>
  jsonSchemaOfShape(readShape(schema, name));
