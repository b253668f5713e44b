import * as yup from 'yup';
import { fieldError, GatewayError, validationError } from '../../core/gateway-errors.ts';
import { fastCheckOf, type FastCheck } from './request-shapes.ts';

/** yup's `messages[0].role` / `messages["a"]` paths, as the client wrote the body. */
function location(path: string | undefined): string {
  return path ? path.replace(/\["([^"]+)"\]/g, '.$1') : 'body';
}

/** Most bad items of one array a ValidationError lists; yup builds each error slowly, so more are only counted. */
export const LISTED_BAD_ITEMS = 50;

const joinPath = (prefix: string, path: string | undefined) =>
  !path ? prefix : !prefix || path.startsWith('[') ? prefix + path : `${prefix}.${path}`;

// Adds each of yup's problems as a field error; returns the first one's location.
function collect(error: unknown, errors: string[], prefix = ''): string {
  if (!(error instanceof yup.ValidationError)) throw error;
  const inner = error.inner.length ? error.inner : [error];
  for (const problem of inner) errors.push(fieldError(location(joinPath(prefix, problem.path)), problem.message));
  return location(joinPath(prefix, inner[0]?.path));
}

/**
 * yup's errors for a body the fast check refused, with at most {@link LISTED_BAD_ITEMS} bad items per
 * long array: the array's head goes through the schema with the rest of the body, and further bad
 * items (found by the item check) through the item schema, until the cap; the others are counted.
 */
function schemaErrors(
  schema: yup.AnyObjectSchema,
  body: Record<string, unknown>,
  fast: FastCheck | undefined,
  errors: string[],
): string | undefined {
  const head: Record<string, unknown> = { ...body };
  const beyondHead: { key: string; items: unknown[]; ok: (item: unknown) => boolean }[] = [];
  for (const [key, ok] of Object.entries(fast?.items ?? {})) {
    const items = body[key];
    if (!Array.isArray(items) || items.length <= LISTED_BAD_ITEMS) continue;
    head[key] = items.slice(0, LISTED_BAD_ITEMS);
    beyondHead.push({ key, items, ok });
  }
  let param: string | undefined;
  try {
    schema.validateSync(head, { abortEarly: false, strict: true });
  } catch (error) {
    param = collect(error, errors);
  }
  for (const { key, items, ok } of beyondHead) {
    const itemSchema = (schema.fields[key] as yup.ArraySchema<unknown[], yup.AnyObject>).innerType as yup.Schema;
    let listed = items.slice(0, LISTED_BAD_ITEMS).filter((item) => !ok(item)).length;
    let unlisted = 0;
    for (let index = LISTED_BAD_ITEMS; index < items.length; index++) {
      if (ok(items[index])) continue;
      if (listed >= LISTED_BAD_ITEMS) {
        unlisted++;
        continue;
      }
      listed++;
      try {
        itemSchema.validateSync(items[index], { abortEarly: false, strict: true });
      } catch (error) {
        const first = collect(error, errors, `${key}[${index}]`);
        param ??= first;
      }
    }
    if (unlisted)
      errors.push(
        fieldError(key, `${unlisted} more items are invalid (only the first ${LISTED_BAD_ITEMS} are listed)`),
      );
  }
  return param;
}

/**
 * Checks a body against a schema and collects every bad field (abortEarly off; at most
 * {@link LISTED_BAD_ITEMS} bad items per array), then runs `extraChecks` (e.g. the model lookup) so
 * one 400 lists all problems at once. yup runs only on bodies the fast check (by default the one
 * derived from the schema) refuses, to name the bad fields in yup's words.
 */
export function validateRequest(
  schema: yup.AnyObjectSchema,
  body: Record<string, unknown>,
  extraChecks: () => GatewayError | undefined = () => undefined,
  fast: FastCheck = fastCheckOf(schema),
): void {
  const errors: string[] = [];
  let param: string | undefined;
  if (!fast.accepts(body)) {
    param = schemaErrors(schema, body, fast, errors);
    // A fast check that refused what the schema accepts would be a bug; the schema has the last word.
    if (!errors.length) param = schemaErrors(schema, body, undefined, errors);
  }
  const extra = extraChecks();
  if (extra?.errors) {
    errors.push(...extra.errors.filter((entry) => !errors.includes(entry)));
    param ??= extra.param;
  }
  if (errors.length) throw validationError(errors, param);
}
