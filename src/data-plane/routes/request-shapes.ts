/**
 * A check that accepts exactly what the schema accepts, and the same per item of its array fields (derived from the
 * schema: {@link fastCheckOf}).
 */
export interface FastCheck {
  readonly accepts: (body: Record<string, unknown>) => boolean;
  /** Per top-level array field the schema checks item by item (`yup.array(item)`), the item check. */
  readonly items?: Readonly<Record<string, (item: unknown) => boolean>>;
}
import * as yup from 'yup';

// The one way request shapes are written is the yup schemas in request-schemas.ts (they also word the
// 400's messages). This module reads a schema into a plain shape once, at start, and derives from it
// the fast accept check (compiled into straight-line JavaScript, like a hand-written check) and, in
// src/openapi/request-json-schema.ts, the OpenAPI request component. It reads only the rules listed
// below and refuses every other one at start, so a new rule cannot make the derived forms drift from
// yup unnoticed: extend the reader (and both derived forms) instead. The checks assume strict yup
// validation of parsed JSON (no casting; no String/Number/Boolean wrapper objects).

/** The JSON types a `yup.mixed()` may be narrowed to with {@link jsonTypes}. */
export type JsonType = 'string' | 'number' | 'boolean' | 'object' | 'array';

/** What a yup schema says through `.meta()` that yup's own rules do not: the derived forms read it. */
export interface ShapeMeta {
  /** Set by {@link jsonTypes}: the JSON types its test admits. */
  readonly jsonTypes?: readonly JsonType[];
  /** OpenAPI only: no fields beyond the schema's (the route refuses the others itself, outside yup). */
  readonly closed?: boolean;
  /** OpenAPI only: the field's description. */
  readonly description?: string;
}
const META_KEYS = new Set(['jsonTypes', 'closed', 'description']);

/** The plain form of a schema the derived checks are built from. */
export type Shape = {
  /** `undefined` (an absent field) is accepted. */
  readonly optional: boolean;
  readonly nullable: boolean;
  /** yup's `oneOf` whitelist (primitives only). */
  readonly enum?: readonly (string | number | boolean)[];
  readonly closed?: boolean;
  readonly description?: string;
} & (
  | { readonly kind: 'any' }
  | { readonly kind: 'types'; readonly types: readonly JsonType[] }
  | { readonly kind: 'string'; readonly minLength: number }
  | {
      readonly kind: 'number';
      readonly integer: boolean;
      readonly minimum?: number;
      readonly exclusiveMinimum?: number;
      readonly maximum?: number;
      readonly exclusiveMaximum?: number;
    }
  | { readonly kind: 'boolean' }
  | { readonly kind: 'array'; readonly items?: Shape; readonly minItems: number; readonly maxItems?: number }
  | { readonly kind: 'object'; readonly fields: Readonly<Record<string, Shape>> }
);

const JSON_TYPES_TEST = 'json-types';
const IS_JSON_TYPE: Readonly<Record<JsonType, (value: unknown) => boolean>> = {
  string: (value) => typeof value === 'string',
  number: (value) => typeof value === 'number' && !Number.isNaN(value),
  boolean: (value) => typeof value === 'boolean',
  object: (value) => typeof value === 'object' && value !== null && !Array.isArray(value),
  array: (value) => Array.isArray(value),
};

/**
 * A `yup.mixed()` holding one of `types`, refused with `message` otherwise; absent values are left to
 * its optional/nullable rule. The types go into the schema's meta for the derived forms.
 */
export function jsonTypes(message: string, ...types: JsonType[]) {
  return yup
    .mixed()
    .meta({ jsonTypes: types } satisfies ShapeMeta)
    .test({
      name: JSON_TYPES_TEST,
      message,
      skipAbsent: true,
      test: (value) => types.some((type) => IS_JSON_TYPE[type](value)),
    });
}

/** Metadata for the derived forms only, typed (yup's `.meta()` takes any record). */
export const shapeMeta = (meta: Omit<ShapeMeta, 'jsonTypes'>): ShapeMeta => meta;

type Description = yup.SchemaDescription & { readonly fields?: unknown; readonly innerType?: unknown };

/** What one schema's reading knows: the schema, where it sits, its meta and tests, and the fields every kind shares. */
interface Reading {
  readonly schema: yup.Schema;
  readonly path: string;
  readonly meta: ShapeMeta;
  readonly tests: readonly { readonly name: string; readonly params: Record<string, unknown> }[];
  readonly common: ShapeCommon;
  fail(what: string): never;
  /** A test's numeric parameter, or a failure naming it. */
  param(params: Record<string, unknown>, key: string): number;
}

type ShapeCommon = Pick<Shape, 'optional' | 'nullable' | 'enum' | 'closed' | 'description'>;

/** Reads a yup schema into a {@link Shape}; throws, naming the field, on any rule it cannot carry over exactly. */
export function readShape(schema: yup.Schema, path = 'body'): Shape {
  const fail = (what: string): never => {
    throw new Error(
      `request shape ${path}: ${what} has no derived form (src/data-plane/routes/request-shapes.ts reads only the rules it can carry over exactly)`,
    );
  };
  const description = schema.describe() as Description;
  const meta = (description.meta ?? {}) as ShapeMeta;
  for (const key of Object.keys(meta)) if (!META_KEYS.has(key)) fail(`meta '${key}'`);
  // describe() lists one test per name; two tests sharing a name would hide one.
  if ((schema as unknown as { tests: unknown[] }).tests.length !== description.tests.length)
    fail('two tests of one name');
  if (description.notOneOf.length) fail('notOneOf');
  if (description.oneOf.length && !['string', 'number', 'boolean'].includes(description.type))
    fail(`oneOf on yup.${description.type}()`);
  if (meta.jsonTypes && description.type !== 'mixed') fail('meta jsonTypes outside yup.mixed()');
  if (meta.closed && description.type !== 'object') fail('meta closed outside yup.object()');
  const common: ShapeCommon = {
    optional: description.optional,
    nullable: description.nullable,
    ...(description.oneOf.length
      ? {
          enum: description.oneOf.map((value) =>
            ['string', 'number', 'boolean'].includes(typeof value)
              ? (value as string | number | boolean)
              : fail(`oneOf value ${String(value)}`),
          ),
        }
      : {}),
    ...(meta.closed ? { closed: true } : {}),
    ...(meta.description !== undefined ? { description: meta.description } : {}),
  };
  const tests = description.tests.map((test) => ({
    name: test.name ?? '',
    params: (test.params ?? {}) as Record<string, unknown>,
  }));
  const param = (params: Record<string, unknown>, key: string): number => {
    const value = params[key];
    return typeof value === 'number' && Number.isFinite(value) ? value : fail(`a non-numeric '${key}'`);
  };
  const read = KIND_READERS[description.type];
  return read ? read({ schema, path, meta, tests, common, fail, param }) : fail(`yup.${description.type}()`);
}

const KIND_READERS: Readonly<Record<string, (reading: Reading) => Shape>> = {
  string({ tests, common, fail, param }) {
    let minLength = 0;
    for (const { name, params } of tests) {
      if (name === 'required') minLength = Math.max(minLength, 1);
      // yup counts UTF-16 units, JSON Schema code points: the same only for "not empty".
      else if (name === 'min' && param(params, 'min') <= 1) minLength = Math.max(minLength, param(params, 'min'));
      else fail(`string test '${name}' ${JSON.stringify(params)}`);
    }
    return { ...common, kind: 'string', minLength };
  },
  number({ tests, common, fail, param }) {
    let shape: Extract<Shape, { kind: 'number' }> = { ...common, kind: 'number', integer: false };
    for (const { name, params } of tests) {
      if (name === 'integer') shape = { ...shape, integer: true };
      else if (name === 'min' && 'min' in params) shape = { ...shape, minimum: param(params, 'min') };
      else if (name === 'min' && 'more' in params) shape = { ...shape, exclusiveMinimum: param(params, 'more') };
      else if (name === 'max' && 'max' in params) shape = { ...shape, maximum: param(params, 'max') };
      else if (name === 'max' && 'less' in params) shape = { ...shape, exclusiveMaximum: param(params, 'less') };
      else fail(`number test '${name}'`);
    }
    return shape;
  },
  boolean({ tests, common, fail }) {
    for (const { name } of tests) fail(`boolean test '${name}'`);
    return { ...common, kind: 'boolean' };
  },
  array({ schema, path, tests, common, fail, param }) {
    let minItems = 0;
    let maxItems: number | undefined;
    for (const { name, params } of tests) {
      if (name === 'min') minItems = param(params, 'min');
      else if (name === 'max') maxItems = param(params, 'max');
      else fail(`array test '${name}'`);
    }
    const inner = (schema as yup.ArraySchema<unknown[], yup.AnyObject>).innerType as yup.Schema | undefined;
    return {
      ...common,
      kind: 'array',
      minItems,
      ...(maxItems !== undefined ? { maxItems } : {}),
      ...(inner ? { items: readShape(inner, `${path}[]`) } : {}),
    };
  },
  object({ schema, path, tests, common, fail }) {
    for (const { name } of tests) fail(`object test '${name}'`);
    const fields = Object.fromEntries(
      Object.entries((schema as yup.AnyObjectSchema).fields).map(([key, field]) => [
        key,
        readShape(field as yup.Schema, `${path}.${key}`),
      ]),
    );
    return { ...common, kind: 'object', fields };
  },
  mixed({ meta, tests, common, fail }) {
    if (meta.jsonTypes) {
      if (tests.length !== 1 || tests[0]!.name !== JSON_TYPES_TEST) fail('a jsonTypes() schema with further tests');
      for (const type of meta.jsonTypes) if (!(type in IS_JSON_TYPE)) fail(`JSON type '${type}'`);
      return { ...common, kind: 'types', types: meta.jsonTypes };
    }
    for (const { name } of tests) fail(`custom test '${name}' (use jsonTypes())`);
    return { ...common, kind: 'any' };
  },
};

// JavaScript conditions, true when `v` (an identifier) is of the type.
const TYPE_TEST: Readonly<Record<JsonType, (v: string) => string>> = {
  string: (v) => `typeof ${v} === 'string'`,
  number: (v) => `(typeof ${v} === 'number' && ${v} === ${v})`,
  boolean: (v) => `typeof ${v} === 'boolean'`,
  object: (v) => `(typeof ${v} === 'object' && ${v} !== null && !Array.isArray(${v}))`,
  array: (v) => `Array.isArray(${v})`,
};

/**
 * The shape as one JavaScript function of plain checks, returning false at the first refused value:
 * the code a hand-written check would be. Property names and numbers are the only text taken from the
 * schema, the names as JSON string literals and the numbers checked finite.
 */
export function compileAccepts(shape: Shape, name = 'accepts'): (value: unknown) => boolean {
  let counter = 0;
  const literal = (value: string | number | boolean) =>
    typeof value === 'string' ? JSON.stringify(value) : String(value);
  function statements(node: Shape, v: string): string[] {
    const body: string[] = refusals(node, v).map((condition) => `if (${condition}) return false;`);
    if (node.kind === 'array' && node.items) {
      const index = `i${counter++}`;
      const item = `v${counter++}`;
      body.push(
        `for (let ${index} = 0; ${index} < ${v}.length; ${index}++) {`,
        `const ${item} = ${v}[${index}];`,
        ...statements(node.items, item),
        '}',
      );
    } else if (node.kind === 'object') {
      for (const [key, field] of Object.entries(node.fields)) {
        const value = `v${counter++}`;
        body.push(`const ${value} = ${v}[${JSON.stringify(key)}];`, ...statements(field, value));
      }
    }
    if (node.enum)
      body.push(`if (!(${node.enum.map((value) => `${v} === ${literal(value)}`).join(' || ')})) return false;`);
    if (node.kind === 'any') return body;
    // Every type check refuses undefined and null; the guard lets through the ones the schema allows.
    const guard =
      node.optional && node.nullable
        ? `${v} != null`
        : node.optional
          ? `${v} !== undefined`
          : node.nullable
            ? `${v} !== null`
            : undefined;
    return guard ? [`if (${guard}) {`, ...body, '}'] : body;
  }
  const root = `v${counter++}`;
  const source = [
    `'use strict';`,
    ...statements(shape, root),
    'return true;',
    `//# sourceURL=request-shape:${name.replace(/[^\w.:-]/g, '_')}`,
  ].join('\n');
  return new Function(root, source) as (value: unknown) => boolean;
}

/** The conditions under which a value `v` of this shape is refused, before its items or fields are looked at. */
function refusals(node: Shape, v: string): string[] {
  switch (node.kind) {
    case 'any':
      // yup.mixed() has no type check: the absent values are refused here, the guard lets the rest in.
      return [...(node.optional ? [] : [`${v} === undefined`]), ...(node.nullable ? [] : [`${v} === null`])];
    case 'types':
      return [`!(${node.types.map((type) => TYPE_TEST[type](v)).join(' || ')})`];
    case 'string':
      return [`typeof ${v} !== 'string'${node.minLength ? ` || ${v}.length < ${node.minLength}` : ''}`];
    case 'number':
      return [
        node.integer ? `!Number.isInteger(${v})` : `typeof ${v} !== 'number' || ${v} !== ${v}`,
        ...(node.minimum === undefined ? [] : [`${v} < ${node.minimum}`]),
        ...(node.exclusiveMinimum === undefined ? [] : [`${v} <= ${node.exclusiveMinimum}`]),
        ...(node.maximum === undefined ? [] : [`${v} > ${node.maximum}`]),
        ...(node.exclusiveMaximum === undefined ? [] : [`${v} >= ${node.exclusiveMaximum}`]),
      ];
    case 'boolean':
      return [`typeof ${v} !== 'boolean'`];
    case 'array':
      return [
        `!Array.isArray(${v})${node.minItems ? ` || ${v}.length < ${node.minItems}` : ''}${node.maxItems !== undefined ? ` || ${v}.length > ${node.maxItems}` : ''}`,
      ];
    case 'object':
      return [`typeof ${v} !== 'object' || ${v} === null || Array.isArray(${v})`];
  }
}

const FAST_CHECK_CACHE = new WeakMap<yup.Schema, FastCheck>();

/**
 * The schema's fast accept check (compiled on first use, then cached): `accepts` for the body, and per
 * top-level array field with an item schema, the item check.
 */
export function fastCheckOf(schema: yup.AnyObjectSchema, name = 'body'): FastCheck {
  let check = FAST_CHECK_CACHE.get(schema);
  if (check) return check;
  const shape = readShape(schema, name);
  if (shape.kind !== 'object') throw new Error(`request shape ${name}: a request schema is a yup.object()`);
  const items: Record<string, (item: unknown) => boolean> = {};
  for (const [key, field] of Object.entries(shape.fields))
    if (field.kind === 'array' && field.items) items[key] = compileAccepts(field.items, `${name}.${key}[]`);
  check = { accepts: compileAccepts(shape, name) as (body: Record<string, unknown>) => boolean, items };
  FAST_CHECK_CACHE.set(schema, check);
  return check;
}
