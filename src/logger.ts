import { pino, type Logger } from 'pino';

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
