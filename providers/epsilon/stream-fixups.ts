import type { SseEvent, StreamFixup } from '../../src/plugins/plugin-contract.ts';

interface Chunk {
  choices?: { delta?: { function_call?: { name?: unknown; arguments?: unknown } | null } }[];
}

const isEmptyCall = (call: unknown) => {
  const { name, arguments: args } = (call ?? {}) as { name?: unknown; arguments?: unknown };
  return call !== null && typeof call === 'object' && name === '' && args === '';
};

/**
 * This upstream closes streams with a placeholder `"function_call":{"name":"","arguments":""}` in the
 * delta, which SDK stream helpers read as a call without a name and fail on. Only that exact
 * placeholder is removed; real or partial calls, `tool_calls`, text and usage pass untouched.
 */
export const dropEmptyFunctionCall: StreamFixup = (event: SseEvent) => {
  if (!event.data.includes('"function_call"')) return undefined;
  let chunk: Chunk;
  try {
    chunk = JSON.parse(event.data) as Chunk;
  } catch {
    return undefined;
  }
  let changed = false;
  for (const choice of chunk.choices ?? []) {
    if (choice.delta && isEmptyCall(choice.delta.function_call)) {
      delete choice.delta.function_call;
      changed = true;
    }
  }
  return changed ? { ...event, data: JSON.stringify(chunk) } : undefined;
};
