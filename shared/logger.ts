import pino, { Logger } from 'pino';

export type { Logger };

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
