import type { FieldPath } from './config-problems.ts';

/** Reports one problem (by field of the file, or naming the variable) and lets the checks go on. */
export type Problem = (text: string, at?: FieldPath) => void;

/** Whether a setting's value is an http:// or https:// URL. */
export function isHttpUrl(value: string): boolean {
  try {
    const url = new URL(value);
    return url.protocol === 'http:' || url.protocol === 'https:';
  } catch {
    return false;
  }
}

/**
 * A `true`/`false` variable (also `1`/`0`); undefined when unset or empty, a problem (never quoting more than the
 * value) otherwise.
 */
export function envFlag(env: NodeJS.ProcessEnv, name: string, problem: Problem): boolean | undefined {
  const value = env[name]?.trim().toLowerCase();
  if (value === undefined || value === '') return undefined;
  if (value === 'true' || value === '1') return true;
  if (value === 'false' || value === '0') return false;
  problem(`${name} must be true or false, got '${env[name]}'`);
  return undefined;
}
