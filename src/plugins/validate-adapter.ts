import { KNOWN_FIELDS, unknownFields, isRecord } from './known-fields.ts';

type Problem = [suffix: string, problem: string];

const isEventMatch = (value: unknown): boolean =>
  (typeof value === 'string' && value !== '' && !/[\r\n]/.test(value)) || typeof value === 'function';
const EVENT_MATCH = "the vendor's event name (its `event:` field) or a function of the event that returns true for it";
const HOOKS = 'an object of hooks (buildRequest, mapAnswer, usage, and stream, checkRequest, mapError when needed)';
const USAGE = '{ fromBody, fromStreamEvent }';
const MAPPING = '{ terminal, map, createState?, error? }';
const FUNCTION = 'must be a function';
const MISSING_FUNCTION = 'missing: a function';

/** Each field of `value` the contract does not know, under `at` (`.stream.mapp: unknown field: …`). */
const unknownOf = (value: Record<string, unknown>, known: readonly string[], at: string): Problem[] =>
  unknownFields(value, known).map(({ field, problem }): Problem => [`${at}.${field}`, problem]);

/**
 * Everything wrong with a route's `adapter`, each as `[field suffix, problem]` (`.buildRequest`,
 * `.stream.terminal`); empty when it fits. A field of the wrong type is not checked further.
 */
export function adapterProblems(adapter: unknown, routeId: string): Problem[] {
  if (!isRecord(adapter)) return [['', `must be ${HOOKS}`]];
  const problems = unknownOf(adapter, KNOWN_FIELDS.adapter, '');
  for (const hook of ['buildRequest', 'mapAnswer'] as const) {
    if (adapter[hook] === undefined) problems.push([`.${hook}`, MISSING_FUNCTION]);
    else if (typeof adapter[hook] !== 'function') problems.push([`.${hook}`, FUNCTION]);
  }
  for (const hook of ['checkRequest', 'mapError'] as const) {
    if (adapter[hook] !== undefined && typeof adapter[hook] !== 'function') problems.push([`.${hook}`, FUNCTION]);
  }
  const usage = adapter.usage;
  if (usage === undefined) problems.push(['.usage', `missing: the vendor's usage reader, ${USAGE}`]);
  else if (!isRecord(usage) || typeof usage.fromBody !== 'function' || typeof usage.fromStreamEvent !== 'function') {
    problems.push(['.usage', 'must have fromBody and fromStreamEvent functions']);
  }
  const stream = adapter.stream;
  if (stream === undefined) return problems;
  if (routeId === 'count-tokens') return [...problems, ['.stream', 'count_tokens answers never stream: remove it']];
  if (!isRecord(stream)) return [...problems, ['.stream', `must be an object: ${MAPPING}`]];
  problems.push(...unknownOf(stream, KNOWN_FIELDS.streamMapping, '.stream'));
  if (stream.terminal === undefined) {
    problems.push(['.stream.terminal', `missing: the event that completes the vendor's stream (${EVENT_MATCH})`]);
  } else if (!isEventMatch(stream.terminal)) problems.push(['.stream.terminal', `must be ${EVENT_MATCH}`]);
  if (stream.error !== undefined && !isEventMatch(stream.error)) {
    problems.push(['.stream.error', `must be ${EVENT_MATCH}`]);
  }
  if (typeof stream.map !== 'function') {
    problems.push(['.stream.map', stream.map === undefined ? MISSING_FUNCTION : FUNCTION]);
  }
  if (stream.createState !== undefined && typeof stream.createState !== 'function') {
    problems.push(['.stream.createState', FUNCTION]);
  }
  return problems;
}
