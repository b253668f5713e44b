export const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Polls `check` every 25 ms until it holds; resolves with the time it took, or fails after `timeoutMs`.
 * A check that throws counts as "not yet" (a store or Redis may still be coming back); the last error
 * is reported if time runs out.
 */
export async function eventually(
  check: () => Promise<boolean> | boolean,
  what: string,
  timeoutMs = 5000,
): Promise<number> {
  const started = Date.now();
  let lastError: unknown;
  for (;;) {
    try {
      if (await check()) return Date.now() - started;
    } catch (error) {
      lastError = error;
    }
    if (Date.now() - started > timeoutMs) {
      throw new Error(
        `timed out after ${timeoutMs} ms waiting for ${what}${lastError ? ` (last error: ${String(lastError)})` : ''}`,
      );
    }
    await sleep(25);
  }
}
