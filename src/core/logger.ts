import { pino, symbols, type Logger } from 'pino';

/** Destinations this module opened on standard output (the access log may buffer in front of them). */
const stdoutDestinations = new WeakSet<object>();

/** JSON logs on stdout. Credentials are redacted wherever a log line might carry headers. */
export function createLogger(level: string, destination?: NodeJS.WritableStream): Logger {
  let target = destination as pino.DestinationStream | undefined;
  if (target === undefined) {
    target = pino.destination({ dest: 1, sync: false });
    stdoutDestinations.add(target);
  }
  return pino(
    {
      level,
      base: { service: 'model-gateway' },
      redact: {
        paths: ['*.authorization', '*.headers.authorization', '*.headers["x-api-key"]', '*.apiKey', '*.key'],
        censor: '[redacted]',
      },
    },
    target,
  );
}

/** Bytes of access-log lines gathered before one write to standard output, and the longest a line waits. */
const ACCESS_LOG_BUFFER_BYTES = 8 * 1024;
const ACCESS_LOG_FLUSH_MS = 500;

/**
 * The access log's logger: same level and base fields as `logger`, without the redaction paths.
 * Redaction walks every logged object (a third of the access line's cost when measured); the access
 * line is built from named fields only and never holds a header or a key, so it needs none.
 * When `logger` writes to standard output, access lines are gathered into writes of 8 KiB or every
 * 500 ms (and flushed at exit): one write per line was the largest cost the access log added per
 * request. Lines given to any other destination (tests capture them) go there at once.
 * Keep its level in step with `logger`'s (a config reload sets both).
 */
export function createAccessLogger(logger: Logger): Logger {
  const shared = (logger as unknown as Record<symbol, pino.DestinationStream>)[symbols.streamSym];
  const destination = shared !== undefined && stdoutDestinations.has(shared)
    ? pino.destination({ dest: 1, sync: false, minLength: ACCESS_LOG_BUFFER_BYTES, periodicFlush: ACCESS_LOG_FLUSH_MS } as Parameters<typeof pino.destination>[0])
    : shared;
  // The bindings carry the base fields and a child's own (a worker's id).
  return pino({ level: logger.level, base: { service: 'model-gateway', ...logger.bindings() } }, destination);
}
