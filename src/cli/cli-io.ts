/** Where a command writes: its normal output and its messages for the operator. */
export interface CliIo {
  out(text: string): void;
  err(text: string): void;
}

/** A command's answer to bad arguments: its message and usage, exit code 2. */
export class CliUsageError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'CliUsageError';
  }
}
