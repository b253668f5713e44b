/**
 * A value a reload swaps whole, read as `.current` at each use: reading a plain field runs no code, so a request pays
 * nothing for it (the live configuration is one such holder).
 */
export interface Current<T> {
  readonly current: T;
}
