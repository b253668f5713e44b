import type { SseEvent, StreamFixup } from '../../src/plugins/plugin-contract.ts';

type Json = Record<string, unknown>;

const isObject = (value: unknown): value is Json =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

/** The placeholder exactly: both fields present and `""`. A null call or a call with a name is real data. */
const isEmptyCall = (call: unknown) => isObject(call) && call.name === '' && call.arguments === '';

/**
 * This upstream closes streams with a placeholder `"function_call":{"name":"","arguments":""}` in the
 * delta, which SDK stream helpers read as a call without a name and fail on (dropping the real
 * `tool_calls` with it). Only that exact placeholder is removed; real or partial calls, a null
 * `function_call`, `tool_calls`, text, usage, `[DONE]` and non-JSON data pass untouched.
 */
export const dropEmptyFunctionCall: StreamFixup = (event: SseEvent) => {
  if (!event.data.includes('"function_call"')) return undefined;
  let chunk: unknown;
  try {
    chunk = JSON.parse(event.data);
  } catch {
    return undefined;
  }
  const choices = isObject(chunk) && Array.isArray(chunk.choices) ? chunk.choices : [];
  let changed = false;
  for (const choice of choices) {
    const delta: unknown = isObject(choice) ? choice.delta : undefined;
    if (isObject(delta) && isEmptyCall(delta.function_call)) {
      delete delta.function_call;
      changed = true;
    }
  }
  return changed ? { ...event, data: JSON.stringify(chunk) } : undefined;
};
