import * as yup from 'yup';
import { fieldError, GatewayError, validationError } from '../errors/gateway-errors.ts';

/** yup's `messages[0].role` / `messages["a"]` paths, as the client wrote the body. */
function location(path: string | undefined): string {
  return path ? path.replace(/\["([^"]+)"\]/g, '.$1') : 'body';
}

/**
 * Checks a body against a schema and collects every bad field (abortEarly off), then runs
 * `extraChecks` (e.g. the model lookup) so one 400 lists all problems at once. `fastAccept`, when
 * given, must accept exactly what the schema accepts: yup then runs only on bodies it refuses, to name
 * the bad fields.
 */
export function validateRequest(
  schema: yup.AnyObjectSchema,
  body: Record<string, unknown>,
  extraChecks: () => GatewayError | undefined = () => undefined,
  fastAccept?: (body: Record<string, unknown>) => boolean,
): void {
  const errors: string[] = [];
  let param: string | undefined;
  try {
    if (!fastAccept?.(body)) schema.validateSync(body, { abortEarly: false, strict: true });
  } catch (error) {
    if (!(error instanceof yup.ValidationError)) throw error;
    const inner = error.inner.length ? error.inner : [error];
    for (const problem of inner) errors.push(fieldError(location(problem.path), problem.message));
    param = location(inner[0]?.path);
  }
  const extra = extraChecks();
  if (extra?.errors) {
    errors.push(...extra.errors.filter((entry) => !errors.includes(entry)));
    param ??= extra.param;
  }
  if (errors.length) throw validationError(errors, param);
}
