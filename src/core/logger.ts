import { pino, symbols, type Logger } from 'pino';

/** Destinations this module opened on standard output (the access log may buffer in front of them). */
const stdoutDestinations = new WeakSet<object>();

/**
 * JSON logs on stdout. Credentials are redacted wherever a log line might carry headers.
 * Lines go out with a synchronous write each: an asynchronous write can still be under way when the
 * process exits, and the lines after it, written at exit, would then come out before it (or, with the
 * reader gone, pino's flush at exit retries for ever). These lines are few (start-up, warnings,
 * errors); the access log, one line per request, has a logger of its own.
 */
export function createLogger(level: string, destination?: NodeJS.WritableStream): Logger {
  let target = destination as pino.DestinationStream | undefined;
  if (target === undefined) {
    target = pino.destination({ dest: 1, sync: true });
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

type Destination = ReturnType<typeof pino.destination>;

/** The access-log buffers on standard output, written out when the process exits. */
const bufferedDestinations = new Set<Destination>();

function flushAtExit(): void {
  for (const destination of bufferedDestinations) {
    // flush(), not flushSync(): the destination is synchronous, so flush() writes at once too, and a
    // failed write goes to pino's error handling (which drops the lines once the reader has gone),
    // where flushSync() would retry it for ever (EPIPE included) and the exit would never end.
    try {
      destination.flush();
    } catch {
      // Nothing more can be done for these lines at exit.
    }
  }
}

/**
 * The access log's logger: same level and base fields as `logger`, without the redaction paths.
 * Redaction walks every logged object (a third of the access line's cost when measured); the access
 * line is built from named fields only and never holds a header or a key, so it needs none.
 * When `logger` writes to standard output, access lines are gathered into writes of 8 KiB or every
 * 500 ms (and written out at exit): one write per line was the largest cost the access log added per
 * request. Those writes are synchronous, so no write is ever under way when the process exits and lines
 * keep their order (an asynchronous write still under way at exit came out after the lines written at
 * exit); they also take less CPU than asynchronous ones (no hand-off to libuv's thread pool). A reader
 * that stops reading holds the process up once the pipe is full, as for `logger`'s lines. Lines given to
 * any other destination (tests capture them) go there at once.
 * Keep its level in step with `logger`'s (a config reload sets both).
 */
export function createAccessLogger(logger: Logger): Logger {
  const shared = (logger as unknown as Record<symbol, pino.DestinationStream>)[symbols.streamSym];
  let destination = shared;
  if (shared !== undefined && stdoutDestinations.has(shared)) {
    const buffered = pino.destination({
      dest: 1,
      sync: true,
      minLength: ACCESS_LOG_BUFFER_BYTES,
      periodicFlush: ACCESS_LOG_FLUSH_MS,
    });
    // pino writes buffers out at exit for asynchronous destinations only.
    if (bufferedDestinations.size === 0) process.on('exit', flushAtExit);
    bufferedDestinations.add(buffered);
    buffered.once('close', () => {
      bufferedDestinations.delete(buffered);
      if (bufferedDestinations.size === 0) process.off('exit', flushAtExit);
    });
    destination = buffered;
  }
  // The bindings carry the base fields and a child's own (a worker's id).
  return pino({ level: logger.level, base: { service: 'model-gateway', ...logger.bindings() } }, destination);
}
