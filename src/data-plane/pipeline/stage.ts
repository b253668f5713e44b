import type { Exchange } from './exchange.ts';

/** What follows a stage in its route's list: the rest of the pipeline over the same exchange. */
export type Next = (exchange: Exchange) => Promise<void>;

/**
 * One step of a model request over its {@link Exchange}: it does its part, runs `next` (or answers
 * without it), and cleans up what it holds in `finally`. A stage is made by a named factory that takes
 * only what the stage uses, and it imports no other stage.
 */
export type Stage = (exchange: Exchange, next: Next) => Promise<void>;

const DONE: Next = () => Promise.resolve();

/**
 * A route's stages as one function, each stage's `next` bound once here (no closure per request). A stage
 * that is off for the route or the configuration is simply not in the list: it costs nothing.
 */
export function pipeline(stages: readonly Stage[]): Next {
  let next = DONE;
  for (let index = stages.length - 1; index >= 0; index--) {
    const stage = stages[index]!;
    const after = next;
    next = (exchange) => stage(exchange, after);
  }
  return next;
}

/** The names of a list's stages, in order (the diagram of `docs/design.md` is checked against them). */
export function stageNames(stages: readonly Stage[]): string[] {
  return stages.map((stage) => stage.name);
}
