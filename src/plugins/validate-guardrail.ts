import { KNOWN_FIELDS, unknownFields, isRecord } from './known-fields.ts';
import { SUPPORTED_CONTRACT_VERSIONS, type GuardrailFinding, type GuardrailPlugin } from './plugin-contract.ts';
import { PluginFault } from './plugin-fault.ts';
import { PluginLoadError } from './validate-plugin.ts';

/** Largest `maxFindingChars` a guardrail may declare: more would hold a stream's text for very long. */
export const MAX_FINDING_CHARS = 65_536;

/** Whether a module's default export declares a guardrail (it names one) rather than a provider (a vendor). */
export function declaresGuardrail(candidate: unknown): boolean {
  return isRecord(candidate) && 'guardrail' in candidate && !('vendor' in candidate);
}

/** What `scan` and `checkOptions` may return, for the fault's message. */
const SHAPES = {
  scan: "a guardrail's scan returns undefined or a list of findings { start, end, replacement? }: whole numbers with 0 <= start < end <= the text's length, replacement a string",
  checkOptions: "a guardrail's checkOptions returns undefined or a list of problems (strings)",
} as const;

function describe(value: unknown): string {
  if (value === null || value === undefined || typeof value === 'number' || typeof value === 'boolean')
    return String(value);
  if (typeof value === 'string') return JSON.stringify(value.length > 40 ? `${value.slice(0, 40)}…` : value);
  if (Array.isArray(value)) return `a list of ${value.length}`;
  if (typeof value === 'object') return `{ ${Object.keys(value).slice(0, 4).join(', ')} }`;
  return `a ${typeof value}`;
}

/** Why a finding does not fit a text of `length` code units, or undefined when it does. */
function badFinding(finding: unknown, length: number): string | undefined {
  if (!isRecord(finding)) return `an item that is ${describe(finding)}`;
  const { start, end, replacement } = finding as Partial<Record<keyof GuardrailFinding, unknown>>;
  if (
    !Number.isInteger(start) ||
    !Number.isInteger(end) ||
    (start as number) < 0 ||
    (start as number) >= (end as number) ||
    (end as number) > length
  ) {
    return `a finding { start: ${describe(start)}, end: ${describe(end)} } for a text of ${length} characters`;
  }
  if (replacement !== undefined && typeof replacement !== 'string')
    return `a finding whose replacement is ${describe(replacement)}`;
  return undefined;
}

/** `scan`, whose throw or wrong result is the guardrail's {@link PluginFault} (hook `scan`). */
function guardScan(name: string, scan: GuardrailPlugin['scan']): GuardrailPlugin['scan'] {
  return function guardedScan(text, context) {
    let result;
    try {
      result = scan(text, context);
    } catch (error) {
      throw error instanceof PluginFault ? error : new PluginFault(name, 'scan', error);
    }
    if (result === undefined) return result;
    if (!Array.isArray(result))
      throw new PluginFault(name, 'scan', new TypeError(`returned ${describe(result)}; ${SHAPES.scan}`), 'returned');
    for (const finding of result) {
      const bad = badFinding(finding, text.length);
      if (bad) throw new PluginFault(name, 'scan', new TypeError(`returned ${bad}; ${SHAPES.scan}`), 'returned');
    }
    return result;
  };
}

function guardCheckOptions(
  name: string,
  checkOptions: NonNullable<GuardrailPlugin['checkOptions']>,
): GuardrailPlugin['checkOptions'] {
  return function guardedCheckOptions(options) {
    let result;
    try {
      result = checkOptions(options);
    } catch (error) {
      throw new PluginFault(name, 'checkOptions', error);
    }
    if (result === undefined || (Array.isArray(result) && result.every((problem) => typeof problem === 'string')))
      return result;
    throw new PluginFault(
      name,
      'checkOptions',
      new TypeError(`returned ${describe(result)}; ${SHAPES.checkOptions}`),
      'returned',
    );
  };
}

/**
 * Checks one guardrail declaration whole, as it came from its module, and gives it back with its hooks
 * guarded (a throw or a wrong result is a {@link PluginFault} naming the guardrail and the hook). Throws
 * a {@link PluginLoadError} carrying every bad field.
 */
export function validateGuardrail(name: string, candidate: unknown): GuardrailPlugin {
  if (!isRecord(candidate))
    throw new PluginLoadError(name, 'default export', 'must be the object made by defineGuardrail({...})');
  const problems: PluginLoadError[] = [];
  const fail = (field: string, problem: string) => problems.push(new PluginLoadError(name, field, problem));
  for (const unknown of unknownFields(candidate, KNOWN_FIELDS.guardrail)) fail(unknown.field, unknown.problem);
  const supported = SUPPORTED_CONTRACT_VERSIONS.join(', ');
  if (candidate.contract === undefined)
    fail(
      'contract',
      `missing: declare the contract version the guardrail is written for (this gateway supports ${supported})`,
    );
  else if (!(SUPPORTED_CONTRACT_VERSIONS as readonly unknown[]).includes(candidate.contract))
    fail(
      'contract',
      `version ${JSON.stringify(candidate.contract)} is not supported (this gateway supports ${supported})`,
    );
  if (candidate.guardrail !== name)
    fail(
      'guardrail',
      `must equal the guardrail's folder and manifest name '${name}', got ${JSON.stringify(candidate.guardrail)}`,
    );
  if (!/^[a-z0-9][a-z0-9-]*$/.test(name)) fail('guardrail', 'must be lower case letters, digits and dashes');
  const { maxFindingChars } = candidate;
  if (
    maxFindingChars !== undefined &&
    !(
      Number.isInteger(maxFindingChars) &&
      (maxFindingChars as number) >= 1 &&
      (maxFindingChars as number) <= MAX_FINDING_CHARS
    )
  ) {
    fail('maxFindingChars', `must be a whole number from 1 to ${MAX_FINDING_CHARS}`);
  }
  if (typeof candidate.scan !== 'function') fail('scan', 'must be a function (text, context) => findings');
  if (candidate.checkOptions !== undefined && typeof candidate.checkOptions !== 'function')
    fail('checkOptions', 'must be a function (options) => problems');
  if (problems.length) throw PluginLoadError.combine(problems);
  const declared = candidate as unknown as GuardrailPlugin;
  return {
    ...declared,
    scan: guardScan(name, declared.scan),
    ...(declared.checkOptions ? { checkOptions: guardCheckOptions(name, declared.checkOptions) } : {}),
  };
}
