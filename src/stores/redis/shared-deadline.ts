interface Waiting {
  readonly at: number;
  settled: boolean;
  readonly reject: (error: Error) => void;
}

// Settled entries at the front of the queue are dropped in batches of at least this many.
const COMPACT_AT = 1024;

/**
 * Races Redis commands against one timeout: each rejects when it has not settled within `timeoutMs`
 * (the command itself is not cancelled: during a stall it may still run once Redis resumes). As on
 * every request's reservation, many commands share one timer, armed for the oldest command still
 * waiting, instead of a timer and two promises each; commands wait in the order they were sent, so
 * their deadlines come in that order too.
 */
export class SharedDeadline {
  private readonly queue: Waiting[] = [];
  private head = 0;
  private timer: NodeJS.Timeout | undefined;

  constructor(readonly timeoutMs: number) {}

  /** Settles as `promise` does, or rejects once `timeoutMs` passed without it settling. */
  race<T>(promise: Promise<T>): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      const waiting: Waiting = { at: Date.now() + this.timeoutMs, settled: false, reject };
      this.queue.push(waiting);
      this.timer ??= this.arm(this.timeoutMs);
      promise.then(
        (value) => {
          if (waiting.settled) return;
          waiting.settled = true;
          resolve(value);
        },
        (error: unknown) => {
          if (waiting.settled) return;
          waiting.settled = true;
          reject(error);
        },
      );
    });
  }

  private arm(delayMs: number): NodeJS.Timeout {
    const timer = setTimeout(() => this.expire(), Math.max(1, delayMs));
    // A command still waiting keeps its own socket open; the timer alone holds nothing.
    timer.unref();
    return timer;
  }

  private expire(): void {
    this.timer = undefined;
    const now = Date.now();
    const { queue } = this;
    while (this.head < queue.length) {
      const waiting = queue[this.head]!;
      if (!waiting.settled) {
        if (waiting.at > now) break;
        waiting.settled = true;
        waiting.reject(new Error(`Redis did not answer within ${this.timeoutMs} ms`));
      }
      this.head++;
    }
    if (this.head >= COMPACT_AT || this.head === queue.length) {
      queue.splice(0, this.head);
      this.head = 0;
    }
    // Settled entries behind the next waiting one are skipped when the timer fires for it.
    if (this.head < queue.length) this.timer = this.arm(queue[this.head]!.at - now);
  }
}
