import * as yup from 'yup';
import { fieldError, validationError } from '../../core/gateway-errors.ts';
import { definedOnly, knownFields } from './limit-fields.ts';

/** How an error names a field (the CLI names its flags); the body's field path by default. */
export type FieldLabel = (path: string) => string;

/** The rule a record's name keeps: a pattern, and how a message words it. */
export interface NameRule {
  readonly pattern: RegExp;
  readonly rule: string;
}

/**
 * The schemas of a named record's body (a team's, a group's): a new one (`name` and the `fields`, in their
 * order), and a change (each field, or `null` to remove it; never the name, which a record keeps).
 */
export function namedRecordSchemas(
  noun: string,
  name: NameRule,
  fields: Readonly<Record<string, () => yup.AnySchema>>,
) {
  const changeable = Object.keys(fields);
  const each = (make: (field: () => yup.AnySchema) => yup.AnySchema) =>
    Object.fromEntries(Object.entries(fields).map(([field, schema]) => [field, make(schema)]));
  const nameSchema = yup
    .string()
    .strict()
    .typeError('must be a string')
    .required('is required')
    .matches(name.pattern, name.rule);
  return {
    changeable,
    newRecord: knownFields(yup.object({ name: nameSchema, ...each((schema) => schema()) }).strict(), [
      'name',
      ...changeable,
    ]),
    changes: knownFields(yup.object(each((schema) => schema().nullable())).strict(), changeable, {
      name: `cannot be changed: a ${noun} keeps its name (the fields a change sets are ${changeable.join(', ')})`,
    }),
  };
}

/**
 * The body through the schema, as it validated: one 400 listing every problem, the schema's first, then the
 * `errors` given.
 */
export function validateBody(schema: yup.Schema, body: unknown, label: FieldLabel, errors: string[] = []): unknown {
  let value: unknown;
  try {
    value = schema.validateSync(body, { abortEarly: false });
  } catch (error) {
    if (!(error instanceof yup.ValidationError)) throw error;
    errors.unshift(...error.inner.map((problem) => fieldError(label(problem.path || 'body'), problem.message)));
  }
  if (errors.length > 0) throw validationError(errors);
  return value;
}

/** The `fields` of a validated body, in that order, those absent left out. */
export function givenFields<T>(value: unknown, fields: readonly string[]): T {
  const given = value as Record<string, unknown>;
  return definedOnly(Object.fromEntries(fields.map((field) => [field, given[field]]))) as T;
}

/** The `fields` a valid change body has, `null` ones included (they remove the field). */
export function changedFields<T>(body: unknown, fields: readonly string[]): T {
  const given = body as Record<string, unknown>;
  return Object.fromEntries(
    fields.filter((field) => Object.hasOwn(given, field)).map((field) => [field, given[field]]),
  ) as T;
}
