import type { ZodError } from 'zod';

/**
 * The one error type of the service. Anything thrown as HttpError reaches the client as
 * `{error, message}` with its status; everything else is a logged 500.
 */
export class HttpError extends Error {
  constructor(
    readonly status: number,
    readonly error: string,
    message: string,
    readonly extra?: Record<string, unknown>,
  ) {
    super(message);
  }
}

export const badRequest = (message: string, extra?: Record<string, unknown>) => new HttpError(400, 'BadRequest', message, extra);
export const unauthorized = (message = 'authentication required') => new HttpError(401, 'Unauthorized', message);
export const forbidden = (message = 'insufficient permissions') => new HttpError(403, 'Forbidden', message);
export const notFound = (what = 'resource') => new HttpError(404, 'NotFound', `${what} not found`);
export const conflict = (message: string) => new HttpError(409, 'Conflict', message);
export const serviceUnavailable = (message: string) => new HttpError(503, 'ServiceUnavailable', message);

/** A zod failure as a 400: the message names each field (`where` when the issue has no path), `details` lists all. */
export function validationError(err: ZodError, where: string): HttpError {
  const details = err.issues.map((i) => ({ field: i.path.length ? i.path.join('.') : where, message: i.message }));
  const message = details.map((d) => `${d.field}: ${d.message}`).join('; ');
  return badRequest(message, { details });
}

/** Reason phrase in PascalCase for a status, used when a lower layer only gives a number. */
export function errorName(status: number): string {
  const names: Record<number, string> = {
    400: 'BadRequest',
    401: 'Unauthorized',
    403: 'Forbidden',
    404: 'NotFound',
    405: 'MethodNotAllowed',
    409: 'Conflict',
    413: 'PayloadTooLarge',
    415: 'UnsupportedMediaType',
    422: 'UnprocessableEntity',
    429: 'TooManyRequests',
    500: 'InternalServerError',
    501: 'NotImplemented', // only POST /v1/auth/validate (spec §4.1)
    503: 'ServiceUnavailable',
    504: 'GatewayTimeout',
  };
  return names[status] ?? (status >= 500 ? 'InternalServerError' : 'BadRequest');
}
