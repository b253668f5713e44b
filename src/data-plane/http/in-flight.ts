/**
 * Counts route handlers still running, so a shutdown can wait until each has recorded its usage:
 * a handler's work (and its usage record) may go on for a few ticks after its connection closed.
 */
export class InFlight {
  private running = 0;
  private waiters: (() => void)[] = [];

  get count(): number {
    return this.running;
  }

  /**
   * Wraps a handler (a data-plane handler or an Express one) so that its run, until its promise settles, is counted.
   */
  track<A extends unknown[], R>(handler: (...args: A) => R): (...args: A) => R {
    return (...args: A): R => {
      this.running += 1;
      let result: R;
      try {
        result = handler(...args);
      } catch (error) {
        this.done();
        throw error;
      }
      if (result instanceof Promise) {
        // Express 5 reads the handler's rejection from the promise handed back; this copy only counts.
        return result.finally(() => this.done()) as R;
      }
      this.done();
      return result;
    };
  }

  /** Resolves once no tracked handler is running. */
  idle(): Promise<void> {
    if (this.running === 0) return Promise.resolve();
    return new Promise((resolve) => this.waiters.push(resolve));
  }

  private done(): void {
    this.running -= 1;
    if (this.running === 0) this.waiters.splice(0).forEach((resolve) => resolve());
  }
}
