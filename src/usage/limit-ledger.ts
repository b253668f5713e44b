/**
 * Counters of token and money limits, shared by every gateway instance: reserve at admission, adjust
 * to the real figure at settlement. The embedded default keeps them in process (day and month ones
 * persisted under the data directory); on Redis each reservation is one atomic script.
 */

/** What a request asks of one counter. */
export interface CounterDemand {
  /** The counter's name (see `Meter.counter`). */
  readonly counter: string;
  readonly limit: number;
  /** The reservation sought; what is reserved is capped at what remains of the limit. */
  readonly want: number;
  /** Refused when less than this remains (the request's input tokens, or their price). */
  readonly need: number;
  /** When the counter's window ends (epoch ms); the counter is dropped then. */
  readonly resetAt: number;
}

export interface ReserveResult {
  /** The index of the first demand refused; undefined when every demand was reserved. */
  readonly refused?: number;
  /**
   * Per demand, its counter's value after the reservation (or, when refused, as it was). Nothing is
   * reserved on any counter when one demand is refused.
   */
  readonly used: readonly number[];
  /** Per demand, the amount reserved (0 for all when refused). */
  readonly reserved: readonly number[];
}

/** A change to a counter at settlement: the real figure minus what was reserved (negative releases). */
export interface CounterChange {
  readonly counter: string;
  readonly delta: number;
  readonly resetAt: number;
}

/**
 * Where a member stands in a roster (see {@link LimitLedger.enroll}): in it, or left out of a full one
 * (`first-over` for the first such answer in the roster's window, across instances on Redis).
 */
export type Enrolment = 'member' | 'over' | 'first-over';

export interface LimitLedger {
  /**
   * Checks every demand and reserves on all of them, or on none, atomically (across instances on
   * Redis). The embedded ledger answers synchronously.
   */
  reserve(demands: readonly CounterDemand[]): ReserveResult | Promise<ReserveResult>;
  /**
   * Applies settlement changes to counters whose window is still open (a closed window is left as it
   * was). Never throws; on Redis the changes are batched and pipelined off the request path.
   */
  adjust(changes: readonly CounterChange[]): void;
  /**
   * Adds `member` to the set `roster` (dropped at `resetAt`, epoch ms) unless it holds `cap` members
   * already, atomically (across instances on Redis). A roster only grows within its window, so an answer
   * holds until then. The embedded ledger answers synchronously.
   */
  enroll(roster: string, member: string, cap: number, resetAt: number): Enrolment | Promise<Enrolment>;
  /** Current values of counters (0 for a counter never touched or expired), for views. */
  peek(counters: readonly string[]): Promise<number[]>;
  /** True while Redis is configured but counting happens in process memory. */
  degraded(): boolean;
  /** Resolves once every change taken so far is applied (or persisted). */
  flush(): Promise<void>;
  close(): Promise<void>;
}
