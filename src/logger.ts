import { pino, symbols, type Logger } from 'pino';

/** JSON logs on stdout. Credentials are redacted wherever a log line might carry headers. */
export function createLogger(level: string, destination?: NodeJS.WritableStream): Logger {
  return pino(
    {
      level,
      base: { service: 'model-gateway' },
      redact: {
        paths: ['*.authorization', '*.headers.authorization', '*.headers["x-api-key"]', '*.apiKey', '*.key'],
        censor: '[redacted]',
      },
    },
    destination as pino.DestinationStream | undefined,
  );
}

/**
 * The access log's logger: same destination, level and base fields as `logger`, without the redaction
 * paths. Redaction walks every logged object (a third of the access line's cost when measured); the
 * access line is built from named fields only and never holds a header or a key, so it needs none.
 * Keep its level in step with `logger`'s (a config reload sets both).
 */
export function createAccessLogger(logger: Logger): Logger {
  const destination = (logger as unknown as Record<symbol, pino.DestinationStream>)[symbols.streamSym];
  // The bindings carry the base fields and a child's own (a worker's id).
  return pino({ level: logger.level, base: { service: 'model-gateway', ...logger.bindings() } }, destination);
}
