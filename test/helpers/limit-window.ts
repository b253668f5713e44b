import { sleep } from './eventually.ts';

/**
 * Request and token limits count in fixed windows aligned on the epoch (the UTC minute by default). A
 * test that counts requests in one window first waits, when less than `neededMs` is left of the
 * current window, for the next one to start, so that the window's end cannot split its count.
 */
export async function withinOneWindow(neededMs: number, windowMs = 60_000): Promise<void> {
  if (neededMs >= windowMs) throw new RangeError(`a test needing ${neededMs} ms cannot fit in a ${windowMs} ms window`);
  const left = windowMs - (Date.now() % windowMs);
  if (left < neededMs) await sleep(left + 10);
}

/** Waits until the current fixed window of `windowMs` has ended (its counts are then gone). */
export async function nextWindow(windowMs = 60_000): Promise<void> {
  await sleep(windowMs - (Date.now() % windowMs) + 10);
}
