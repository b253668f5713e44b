export type AtOnce<T> =
  | { readonly settled: 'fulfilled'; readonly value: T }
  | { readonly settled: 'rejected'; readonly reason: unknown }
  | { readonly settled: 'pending' };

/**
 * How `promise` settled without waiting for anything: 'pending' unless it settled within the
 * microtasks (and nextTicks) that run before an immediate queued now, i.e. before any timer the
 * operation set or I/O it started could have answered it (only immediates queued before this call, or
 * timers already due, may run first). An order check ("failed at once"), not a clock reading: a busy
 * machine delays the immediate and the microtasks alike.
 */
export function settledAtOnce<T>(promise: Promise<T>): Promise<AtOnce<T>> {
  const outcome = promise.then(
    (value): AtOnce<T> => ({ settled: 'fulfilled', value }),
    (reason: unknown): AtOnce<T> => ({ settled: 'rejected', reason }),
  );
  const nextTurn = new Promise<AtOnce<T>>((resolve) => setImmediate(() => resolve({ settled: 'pending' })));
  return Promise.race([outcome, nextTurn]);
}
