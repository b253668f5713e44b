import { CliUsageError, type CliIo } from './cli-io.ts';

/** The one NAME an action of `teams` or `groups` takes (`noun`: team or group); a usage error otherwise. */
export function nameArgument(positionals: string[], noun: string, action: string): string {
  if (positionals.length !== 1) {
    throw new CliUsageError(
      `${noun}s ${action} needs exactly one ${noun} name${action === 'create' ? '' : ` (see ${noun}s list)`}`,
    );
  }
  return positionals[0]!;
}

/** Says no team or group has the name; the exit code 1. */
export function noneNamed(io: Pick<CliIo, 'err'>, noun: string, name: string): number {
  io.err(`No ${noun} named '${name}' (see ${noun}s list)\n`);
  return 1;
}
