import type { ZodError } from 'zod';

/**
 * The one error type of the service. Anything thrown as HttpError reaches the client as
 * `{error, message}` with its status (and `headers`, e.g. Allow, Retry-After); what toHttpError
 * cannot map is a logged 500.
 */
export class HttpError extends Error {
  constructor(
    readonly status: number,
    readonly error: string,
    message: string,
    readonly extra?: Record<string, unknown>,
    readonly headers?: Record<string, string>,
  ) {
    // A refusal (4xx) is an answer, not a fault: no stack is captured. Its stack was never logged,
    // yet GraphQL reads it (graphql-js copies an original error's stack), and formatting a stack
    // with source maps cost more than the rest of a refused GraphQL request.
    const limit = Error.stackTraceLimit;
    if (status < 500) Error.stackTraceLimit = 0;
    try {
      super(message);
    } finally {
      Error.stackTraceLimit = limit;
    }
  }
}

/** Seconds a client is asked to wait (Retry-After) when a dependency is down. */
export const RETRY_AFTER_SECONDS = 5;

/** A message that names its field first (`role_id: no such role`), as every field's 400 does. */
const FIELD_MESSAGE = /^([A-Za-z_][A-Za-z0-9_.[\]]{0,99}): ([\s\S]+)$/;

/**
 * A 400. One whose message names a field (`field: what is wrong`) lists it in `details` too, as a
 * schema's refusal does, unless `extra` gives its own: a client reads every field error one way.
 */
export const badRequest = (message: string, extra?: Record<string, unknown>) => {
  if (extra?.details === undefined) {
    const named = FIELD_MESSAGE.exec(message);
    if (named) extra = { ...extra, details: [{ field: named[1], message: named[2] }] };
  }
  return new HttpError(400, 'BadRequest', message, extra);
};
export const unauthorized = (message = 'authentication required') => new HttpError(401, 'Unauthorized', message);
export const forbidden = (message = 'insufficient permissions') => new HttpError(403, 'Forbidden', message);
export const notFound = (what = 'resource') => new HttpError(404, 'NotFound', `${what} not found`);
export const conflict = (message: string) => new HttpError(409, 'Conflict', message);
/**
 * A 429 of a limit of its own (an export allowance, a sign-in or two-factor lock-out, a mail
 * throttle), with the headers of spec §8 describing that limit: `limit` attempts in its window,
 * none left, and the window's end `retryAfterSeconds` from now. The general tier's headers, set
 * before the route ran, would say requests remain, and a client reading them would retry at once.
 */
export function tooManyRequests(message: string, limit: number, retryAfterSeconds: number): HttpError {
  return new HttpError(429, 'TooManyRequests', message, undefined, {
    'Retry-After': String(retryAfterSeconds),
    'X-RateLimit-Limit': String(limit),
    'X-RateLimit-Remaining': '0',
    'X-RateLimit-Reset': String(Math.ceil(Date.now() / 1000) + retryAfterSeconds),
  });
}
export const serviceUnavailable = (message: string) =>
  new HttpError(503, 'ServiceUnavailable', message, undefined, { 'Retry-After': String(RETRY_AFTER_SECONDS) });

/** Issues a 400 reports at most, and the length of each one's message (zod quotes what was sent). */
const MAX_ISSUES = 20;
const MAX_ISSUE_MESSAGE = 300;

const clip = (s: string, max: number) => (s.length > max ? `${s.slice(0, max - 1)}…` : s);

/**
 * A zod failure as a 400: the message names each field (`where` when the issue has no path),
 * `details` lists them. At most MAX_ISSUES are reported, each clipped, and the message says how many
 * more there were: a body of a million bad values is answered in a few kilobytes, not megabytes.
 */
export function validationError(err: ZodError, where: string): HttpError {
  const details = err.issues.slice(0, MAX_ISSUES).map((i) => ({
    field: clip(i.path.length ? i.path.join('.') : where, MAX_ISSUE_MESSAGE),
    message: clip(i.message, MAX_ISSUE_MESSAGE),
  }));
  const more = err.issues.length - details.length;
  const message =
    details.map((d) => `${d.field}: ${d.message}`).join('; ') + (more > 0 ? `; and ${more} more problems` : '');
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
    408: 'RequestTimeout',
    409: 'Conflict',
    413: 'PayloadTooLarge',
    414: 'URITooLong',
    415: 'UnsupportedMediaType',
    417: 'ExpectationFailed',
    422: 'UnprocessableEntity',
    426: 'UpgradeRequired',
    429: 'TooManyRequests',
    431: 'RequestHeaderFieldsTooLarge',
    500: 'InternalServerError',
    501: 'NotImplemented', // POST /v1/auth/validate (spec §4.1), and an unknown method token (shared/httpEdge.ts)
    503: 'ServiceUnavailable',
    504: 'GatewayTimeout',
    505: 'HTTPVersionNotSupported',
  };
  return names[status] ?? (status >= 500 ? 'InternalServerError' : 'BadRequest');
}

/**
 * The GraphQL `extensions.code` of an HTTP status (spec §4.16): what a GraphQL client branches on,
 * where REST clients read the status.
 */
export function graphqlCode(status: number): string {
  const codes: Record<number, string> = {
    400: 'BAD_USER_INPUT',
    401: 'UNAUTHENTICATED',
    403: 'FORBIDDEN',
    404: 'NOT_FOUND',
    405: 'METHOD_NOT_ALLOWED',
    406: 'NOT_ACCEPTABLE',
    408: 'REQUEST_TIMEOUT',
    409: 'CONFLICT',
    413: 'PAYLOAD_TOO_LARGE',
    415: 'UNSUPPORTED_MEDIA_TYPE',
    429: 'RATE_LIMITED',
    503: 'SERVICE_UNAVAILABLE',
  };
  return codes[status] ?? (status >= 500 ? 'INTERNAL_SERVER_ERROR' : 'BAD_REQUEST');
}

/** What the database layers attach to their errors (pg, knex, Objection's db-errors wrappers). */
interface DbErrorLike {
  code?: unknown;
  message?: unknown;
  name?: unknown;
  detail?: unknown;
  column?: unknown;
  nativeError?: unknown;
  cause?: unknown;
}

/**
 * The error and what it wraps: Objection's UniqueViolationError / ForeignKeyViolationError /
 * DBError keep the driver's error in `nativeError` (without its `code`), others chain `cause`,
 * and a refused connection to a host with several addresses is an AggregateError.
 */
function* unwrap(err: unknown, depth = 0): Generator<DbErrorLike> {
  if (!err || typeof err !== 'object' || depth > 5) return;
  yield err as DbErrorLike;
  const e = err as DbErrorLike;
  yield* unwrap(e.nativeError, depth + 1);
  yield* unwrap(e.cause, depth + 1);
  if (err instanceof AggregateError) for (const inner of err.errors) yield* unwrap(inner, depth + 1);
}

// SQLSTATE 08xxx (connection exception) but 08P01 (a protocol violation: this service's fault, such as
// more bind parameters than a statement takes), 57P01-03 (admin/crash shutdown, cannot connect now),
// 53300 (too many connections), 3D000 (database missing), and socket errors on the way to the server.
const UNREACHABLE_CODES =
  /^(08(?!P01)...|57P0[123]|53300|3D000|ECONNREFUSED|ECONNRESET|ETIMEDOUT|EHOSTUNREACH|ENETUNREACH|ENOTFOUND|EAI_AGAIN|EPIPE)$/;
/** The 503 of a statement sent to a server that stopped answering (see toHttpError). */
export const QUERY_OUTCOME_UNKNOWN =
  'the database stopped answering; a change this request made may still be applied when it resumes: check before repeating it';

/** A statement's error (knex: `<statement> - <message>`) saying its connection ended under it. */
const STATEMENT_CUT_OFF = / - (Connection terminated unexpectedly|read ECONNRESET)$/;

// What pg, knex and tarn say when there is no usable connection (they set no code).
const UNREACHABLE_MESSAGES = new RegExp(
  [
    'Connection terminated',
    'Timeout acquiring a connection',
    'timeout exceeded when trying to connect',
    'Client has encountered a connection error',
    'not currently accepting connections',
    'Connection terminated due to connection timeout',
    // connectionTimeoutMillis: a server that takes the connection and never answers.
    '^timeout expired$',
  ].join('|'),
  'i',
);

/** The column(s) of a constraint failure, from pg's detail `Key (lower(username::text))=(…)` or its `column`. */
function failingField(e: DbErrorLike): string | undefined {
  const key = typeof e.detail === 'string' ? /Key \((.+?)\)=/.exec(e.detail)?.[1] : undefined;
  if (key) {
    // Casts and the functions of expression indexes go, with their other arguments:
    // lower(username::text) → username, lower(normalize(name::text, NFKC)) → name.
    let plain = key.replace(/::[\w ]+/g, '');
    while (/\w+\([^()]*\)/.test(plain)) plain = plain.replace(/\w+\(([^(),]*)(?:,[^()]*)?\)/g, '$1');
    return plain;
  }
  return typeof e.column === 'string' ? e.column : undefined;
}

/**
 * What a row of a referenced table is called in a 400 for a reference to a missing one. A write
 * whose row carries its references (a trip's device_id, category_id, origin_id, destination_id…)
 * needs no read to check them first: the foreign keys check them in the same statement, and their
 * failure reads as `device_id: no such device`.
 */
const REFERENCED_NOUNS: Record<string, string> = {
  trip_categories: 'trip category',
  locations: 'location',
  devices: 'device',
  api_keys: 'API key',
  trips: 'trip',
  users: 'user',
  roles: 'role',
  permissions: 'permission',
  geofences: 'geofence',
  platforms: 'platform',
  oauth_clients: 'OAuth client',
};

/** A PostgreSQL error code as the client error it stands for, or undefined for server faults. */
function fromSqlState(e: DbErrorLike): HttpError | undefined {
  const field = failingField(e);
  const named = (text: string) => (field ? `${field}: ${text}` : text);
  switch (e.code) {
    case '23505':
      return conflict(named('already exists'));
    case '23503': {
      // Deleting what others still reference conflicts with the current state; inserting or
      // updating a reference to a missing record is invalid input (like an unknown id in a body),
      // named by the field and what it points to: `origin_id: no such location`.
      const detail = typeof e.detail === 'string' ? e.detail : '';
      const from = /still referenced from table "([^"]+)"/.exec(detail)?.[1];
      if (from) return conflict(`still in use by ${from}`);
      const into = /is not present in table "([^"]+)"/.exec(detail)?.[1];
      const noun = into === undefined ? undefined : REFERENCED_NOUNS[into];
      return badRequest(named(noun ? `no such ${noun}` : 'referenced record does not exist'));
    }
    case '23502':
      return badRequest(named('is required'));
    case '23514':
    case '22P02':
    case '22003':
    case '22007':
    case '22008':
      return badRequest(named('invalid value'));
    case '22001':
      return badRequest(named('value too long'));
    // Deadlock detected, serialization failure: this request lost to a concurrent one touching the
    // same rows, and nothing was written. A retry goes through.
    case '40P01':
    case '40001':
      return conflict('the change conflicted with a concurrent change to the same records; try again');
    case '22021':
    case '22P05':
      return badRequest(named('text must not contain NUL characters'));
    default:
      return undefined;
  }
}

/**
 * The one mapping of lower-layer failures to what clients see, whatever wraps them: the database
 * unreachable (refused, shut down, starting, pool timeout, connection dropped) is a 503 with
 * Retry-After; constraint and data errors are client errors (unique 23505 → 409; foreign key 23503
 * → 400 for a reference to a missing record, 409 when deleting a record still referenced; a
 * deadlock or serialization failure → 409 to retry; not-null,
 * check, invalid text representation, too long, NUL and other bad values → 400). An HttpError is
 * returned as is; anything else is undefined (a server fault, logged as a 500 by the caller).
 */
export function toHttpError(err: unknown): HttpError | undefined {
  if (err instanceof HttpError) return err;
  for (const e of unwrap(err)) {
    if (e instanceof HttpError) return e;
    const code = typeof e.code === 'string' ? e.code : '';
    // statement_timeout (DATABASE_REQUEST_TIMEOUT_MS, shared/db.ts): a statement that ran too long.
    if (code === '57014') return serviceUnavailable('the database did not answer in time; try again shortly');
    // query_timeout (shared/db.ts): the server took the statement and stopped answering (hung, or
    // paused). It may still run and commit it when it resumes: a write is not known to be undone,
    // so the client is told to look before it repeats one (a blind retry could store it twice).
    if (typeof e.message === 'string' && /(^| - )Query read timeout$/.test(e.message))
      return serviceUnavailable(QUERY_OUTCOME_UNKNOWN);
    // The connection went while a statement was out (knex prefixes the statement's errors with its
    // text, never a failure to connect): the server may have committed it, as above.
    if (typeof e.message === 'string' && STATEMENT_CUT_OFF.test(e.message))
      return serviceUnavailable(QUERY_OUTCOME_UNKNOWN);
    if (
      UNREACHABLE_CODES.test(code) ||
      e.name === 'KnexTimeoutError' ||
      (typeof e.message === 'string' && UNREACHABLE_MESSAGES.test(e.message))
    ) {
      return serviceUnavailable('the database is unreachable; try again shortly');
    }
    const mapped = /^[0-9A-Z]{5}$/.test(code) ? fromSqlState(e) : undefined;
    if (mapped) return mapped;
  }
  return undefined;
}

/**
 * Whether `err` is the database failing to answer (toHttpError's 503s: unreachable, not answering,
 * pool timeouts; not a statement_timeout), as opposed to a refusal or a fault of this service: what
 * OutageLog folds.
 */
export function isDatabaseUnavailable(err: unknown): boolean {
  // A 503 this service made of a database failure (shared/db.ts: a statement or COMMIT cut off)
  // is that failure, for the log as for folding.
  if (err instanceof HttpError && err.status === 503 && err.cause !== undefined)
    return isDatabaseUnavailable(err.cause);
  const chain = [...unwrap(err)];
  if (chain.some((e) => e instanceof HttpError)) return false;
  // statement_timeout: a database that answers, with a statement that ran too long (a lock, a
  // slow plan). No outage: each is logged with its route, and none starts or ends one.
  if (chain.some((e) => e.code === '57014')) return false;
  return toHttpError(err)?.status === 503;
}

/**
 * What went wrong with the database, for the log and for folding repeats of it: the first line of
 * the innermost message, without the statement knex puts in front of it (`<sql with its values> - `),
 * which differs from query to query and may carry personal data. An error without a message (an
 * AggregateError of a refused connect) is named by its code.
 */
export function databaseFailureReason(err: unknown): string {
  let reason = '';
  for (const e of unwrap(err)) {
    const message = typeof e.message === 'string' ? e.message.split('\n', 1)[0] : '';
    const sql = message.lastIndexOf(' - ');
    const text = sql < 0 ? message : message.slice(sql + 3);
    if (text) reason = text;
    else if (!reason && typeof e.code === 'string') reason = e.code;
  }
  return reason || 'unknown database error';
}
