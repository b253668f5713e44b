import { unknownFields } from './known-fields.ts';

/** One bad field of a plugin declaration: its path (`routes.messages.format`) and what is wrong with it. */
export interface FieldProblem {
  readonly field: string;
  readonly problem: string;
}

/**
 * Everything wrong with one plugin declaration so far, each problem named with the path of its field, in
 * the order the checks found them (the order the plugin's error lists them in).
 */
export class DeclarationProblems {
  readonly found: FieldProblem[] = [];

  add(field: string, problem: string): void {
    this.found.push({ field, problem });
  }

  /** Refuses each field of `value` the contract does not know, under `at` (`''` for the plugin's top level). */
  refuseUnknownFields(value: Record<string, unknown>, known: readonly string[], at: string): void {
    for (const unknown of unknownFields(value, known))
      this.add(at ? `${at}.${unknown.field}` : unknown.field, unknown.problem);
  }
}
