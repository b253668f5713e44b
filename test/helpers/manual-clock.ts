/**
 * A clock a test moves by hand, for code that reads the time through `Date.now` and takes no `now`
 * option: nothing passes unless the test says so, however slow the machine is.
 */
export class ManualClock {
  constructor(public time: number) {}

  /** The clock's time; a stable function, fit to be handed out (or captured) as `now`. */
  readonly now = (): number => this.time;

  advance(ms: number): void {
    this.time += ms;
  }
}

/**
 * Runs `run` with `Date.now` answering from `clock`, and restores the real one before returning (also
 * on a throw). Only what `run` does synchronously sees the clock: the synchronous part of an async
 * function (up to its first `await`), or a constructor that captures `Date.now` as its default `now`
 * (e.g. `TrustedCache`), which then keeps reading `clock` for good. Nothing else in the process sees it.
 */
export function withDateNow<T>(clock: ManualClock, run: () => T): T {
  const real = Date.now;
  Date.now = clock.now;
  try {
    return run();
  } finally {
    Date.now = real;
  }
}
