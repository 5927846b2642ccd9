import pino, { Logger } from 'pino';
import { SchemaBehindError } from './schemaCheck';

export type { Logger };

/**
 * A process that could not start (a port in use, the database unreachable…): one structured line,
 * level fatal, then exit 1. Configuration errors are reported before any logger exists
 * (loadConfigOrExit).
 */
export function exitOnStartFailure(name: string, level: string, err: unknown): never {
  const logger = createLogger(name, level === 'silent' ? 'fatal' : level);
  // The schema behind the build: the line says what to run (shared/schemaCheck.ts).
  if (err instanceof SchemaBehindError) logger.fatal({ pending: err.pending }, `${name} not started: ${err.message}`);
  else logger.fatal({ err }, `${name} failed to start`);
  process.exit(1);
}

/** Structured logger for one process. Credentials never reach the log: auth headers are redacted. */
export function createLogger(name: string, level = 'info'): Logger {
  return pino({
    name,
    level,
    redact: {
      paths: [
        'req.headers.authorization',
        'req.headers["x-internal-token"]',
        'req.headers["x-id-app-assertion"]',
        'req.headers["x-id-app-key"]',
        'req.headers.cookie',
        '*.password',
        '*.token',
        '*.secret',
      ],
      censor: '[redacted]',
    },
  });
}
