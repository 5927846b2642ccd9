import type { Middleware } from 'koa';
import { errorName, HttpError } from '../../shared/errors';
import type { Logger } from '../../shared/logger';

interface PgError {
  code?: string;
  constraint?: string;
  detail?: string;
  column?: string;
}

/** Maps database constraint failures that reach the edge to client errors instead of 500s. */
function fromPg(err: PgError): HttpError | undefined {
  switch (err.code) {
    case '23505':
      return new HttpError(409, 'Conflict', `already exists (${err.constraint ?? 'unique constraint'})`);
    case '23503': {
      const field = /Key \(([^)]+)\)/.exec(err.detail ?? '')?.[1] ?? err.constraint ?? 'reference';
      return new HttpError(400, 'BadRequest', `${field}: referenced record does not exist or is still in use`);
    }
    case '22P02':
    case '22003':
    case '22007':
    case '22008':
    case '23514':
    case '23502':
      return new HttpError(400, 'BadRequest', err.column ? `${err.column}: invalid value` : 'invalid value');
    default:
      return undefined;
  }
}

/**
 * Turns every failure into `{error, message}` with the right status. Unknown routes are 404,
 * malformed JSON 400, and anything unexpected a logged 500 that reveals nothing internal.
 */
export function errorHandler(logger: Logger): Middleware {
  return async (ctx, next) => {
    try {
      await next();
      if (ctx.status === 404 && ctx.body === undefined) {
        throw new HttpError(404, 'NotFound', `no route for ${ctx.method} ${ctx.path}`);
      }
    } catch (raw) {
      const err = raw as Error & { status?: number; statusCode?: number; expose?: boolean; type?: string; headers?: Record<string, string> };
      let httpErr: HttpError;
      if (err instanceof HttpError) httpErr = err;
      else if (fromPg(err as PgError)) httpErr = fromPg(err as PgError)!;
      else if ((err.status ?? err.statusCode) && (err.status ?? err.statusCode)! < 500) {
        const status = (err.status ?? err.statusCode)!;
        const message =
          err.type === 'entity.parse.failed' || (status === 400 && /JSON|Unexpected|token/i.test(err.message))
            ? 'invalid JSON body'
            : status === 405
              ? `method ${ctx.method} not allowed on ${ctx.path}`
              : err.message;
        httpErr = new HttpError(status, errorName(status), message);
        if (err.headers) ctx.set(err.headers);
      } else {
        logger.error({ err, method: ctx.method, path: ctx.path }, 'unhandled error');
        httpErr = new HttpError(500, 'InternalServerError', 'an unexpected error occurred');
      }
      ctx.status = httpErr.status;
      ctx.body = { error: httpErr.error, message: httpErr.message, ...(httpErr.extra ?? {}) };
    }
  };
}
