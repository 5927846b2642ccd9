import { Writable } from 'node:stream';
import pino from 'pino';

/** A parsed pino line. */
export type LogLine = Record<string, any> & { msg: string; level: number };

/** A pino logger (level info) whose lines land in `lines`, parsed: for start*(config, { logger }). */
export function captureLog(lines: LogLine[], name: string): pino.Logger {
  return pino(
    { name, level: 'info' },
    new Writable({
      write(chunk, _enc, done) {
        lines.push(JSON.parse(String(chunk)) as LogLine);
        done();
      },
    }),
  );
}
