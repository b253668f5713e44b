import { KNOWN_FIELDS, unknownFields } from './known-fields.ts';

const isRecord = (value: unknown): value is Record<string, unknown> => typeof value === 'object' && value !== null && !Array.isArray(value);
const isEventMatch = (value: unknown): boolean => (typeof value === 'string' && value !== '' && !/[\r\n]/.test(value)) || typeof value === 'function';
const EVENT_MATCH = "must be the vendor's event name (its `event:` field) or a function of the event that returns true for it";

/**
 * Everything wrong with a route's `adapter`, each as `[field suffix, problem]` (`.buildRequest`,
 * `.stream.terminal`); empty when it fits. A field of the wrong type is not checked further.
 */
export function adapterProblems(adapter: unknown, routeId: string): [string, string][] {
  if (!isRecord(adapter)) return [['', 'must be an object of hooks (buildRequest, mapAnswer, usage, and stream, checkRequest, mapError when needed)']];
  const problems: [string, string][] = unknownFields(adapter, KNOWN_FIELDS.adapter).map(({ field, problem }) => [`.${field}`, problem]);
  for (const hook of ['buildRequest', 'mapAnswer'] as const) {
    if (adapter[hook] === undefined) problems.push([`.${hook}`, 'missing: a function']);
    else if (typeof adapter[hook] !== 'function') problems.push([`.${hook}`, 'must be a function']);
  }
  for (const hook of ['checkRequest', 'mapError'] as const) {
    if (adapter[hook] !== undefined && typeof adapter[hook] !== 'function') problems.push([`.${hook}`, 'must be a function']);
  }
  const usage = adapter.usage;
  if (usage === undefined) problems.push(['.usage', "missing: the vendor's usage reader, { fromBody, fromStreamEvent }"]);
  else if (!isRecord(usage) || typeof usage.fromBody !== 'function' || typeof usage.fromStreamEvent !== 'function') {
    problems.push(['.usage', 'must have fromBody and fromStreamEvent functions']);
  }
  const stream = adapter.stream;
  if (stream === undefined) return problems;
  if (routeId === 'count-tokens') return [...problems, ['.stream', 'count_tokens answers never stream: remove it']];
  if (!isRecord(stream)) return [...problems, ['.stream', 'must be an object: { terminal, map, createState?, error? }']];
  problems.push(...unknownFields(stream, KNOWN_FIELDS.streamMapping).map(({ field, problem }): [string, string] => [`.stream.${field}`, problem]));
  if (stream.terminal === undefined) problems.push(['.stream.terminal', `missing: the event that completes the vendor's stream (${EVENT_MATCH.replace('must be ', '')})`]);
  else if (!isEventMatch(stream.terminal)) problems.push(['.stream.terminal', EVENT_MATCH]);
  if (stream.error !== undefined && !isEventMatch(stream.error)) problems.push(['.stream.error', EVENT_MATCH]);
  if (typeof stream.map !== 'function') problems.push(['.stream.map', stream.map === undefined ? 'missing: a function' : 'must be a function']);
  if (stream.createState !== undefined && typeof stream.createState !== 'function') problems.push(['.stream.createState', 'must be a function']);
  return problems;
}
