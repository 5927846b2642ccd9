import type { Context, Middleware } from 'koa';
import { randomBytes } from 'node:crypto';
import { asOAuthError } from '../../shared/domain/oauth';
import { databaseOutageLog } from '../../shared/db';
import {
  databaseFailureReason,
  errorName,
  graphqlCode,
  HttpError,
  isDatabaseUnavailable,
  toHttpError,
} from '../../shared/errors';
import type { Logger } from '../../shared/logger';
import type { OutageLog } from '../../shared/outageLog';
import { endOfTurn, leavesAtEndOfTurn } from '../answerTurn';
import { compressAnswer } from '../compression';
import type { RouteTraits } from '../routing';
import { isRoutePath } from '../../shared/routePaths';

const GRAPHQL_PATH = '/v1/gql';

/** JSON.parse's own messages (V8): they say what was wrong and where (`at position 12`). */
const JSON_SYNTAX = /JSON|Unexpected|Expected|position/;

/**
 * The message of a body that did not parse as JSON. A JSON text that is valid but not an object or
 * array (`null`, `42`, `"x"`: both parsers are strict) is named as what it is, not as unreadable; a
 * `__proto__` key (refused by bourne: prototype poisoning) is named; otherwise the parser's own
 * words say what is wrong and where.
 */
function badJsonMessage(text: unknown, parserMessage: string): string {
  if (/forbidden prototype property/.test(parserMessage)) return 'body: the key __proto__ is not allowed';
  if (typeof text === 'string' && text.length <= 1024) {
    try {
      const v: unknown = JSON.parse(text);
      const kind = v === null ? 'null' : typeof v === 'string' ? 'a string' : `a ${typeof v}`;
      return `body: must be a JSON object or array, not ${kind}`;
    } catch {
      // not JSON at all
    }
  }
  if (JSON_SYNTAX.test(parserMessage) && !/only supports object and array/.test(parserMessage))
    return `invalid JSON body: ${parserMessage.length > 200 ? `${parserMessage.slice(0, 199)}…` : parserMessage}`;
  return 'invalid JSON body';
}

/**
 * The headers of a refusal as sent: a 429 of a limit of its own (a sign-in lock-out the system key
 * relays, say) says nothing of rate limits to the system key, which spec §8 sends no
 * X-RateLimit-* headers; Retry-After still tells it when to try again.
 */
function answerHeaders(ctx: Context, headers: Record<string, string>): Record<string, string> {
  const principal = (ctx.state as { principal?: { kind?: string } }).principal;
  if (principal?.kind !== 'system') return headers;
  return Object.fromEntries(Object.entries(headers).filter(([name]) => !/^x-ratelimit-/i.test(name)));
}

/** A request id a client or proxy may send to be quoted back: short, and only characters that need no escaping. */
const GIVEN_REQUEST_ID = /^[A-Za-z0-9._:-]{1,64}$/;

/**
 * The request's id, answered in `X-Request-Id` and written in every line logged about it: the one
 * a proxy or client sent in `X-Request-Id` when it is a plain token of up to 64 characters, else a
 * new one. A 500's message quotes it, so a report can be matched with the log line.
 */
function requestIdOf(ctx: Context): string {
  const given = ctx.req.headers['x-request-id'];
  return typeof given === 'string' && GIVEN_REQUEST_ID.test(given)
    ? given
    : `${PROCESS_ID}-${(++requests).toString(36)}`;
}

/**
 * New request ids: this process's random prefix and a counter, unique across processes and
 * restarts, for ~20 ns (a random UUID per request cost ~180 ns).
 */
const PROCESS_ID = randomBytes(6).toString('hex');
let requests = 0;

/**
 * The path as logged: the matched route's pattern (`/v1/sessions/:token`), never the values in it,
 * for a path parameter may be a credential (a session token) or personal (an email address).
 * Before routing (a refusal by the credential layer) no pattern is known: the first two segments.
 */
export function loggedPath(ctx: Pick<Context, 'path'>): string {
  const route = (ctx as { _matchedRoute?: unknown })._matchedRoute;
  if (typeof route === 'string') return route;
  const segments = ctx.path.split('/');
  return segments.length > 3 ? `${segments.slice(0, 3).join('/')}/…` : ctx.path;
}

/**
 * Compresses what the routes answer (compressAnswer, api/compression.ts), turns every failure into
 * `{error, message}` with the right status (and the error's headers, e.g. Allow, Retry-After), and
 * holds each answer until the end of its event-loop turn (api/answerTurn.ts). Unknown routes are 404, malformed JSON 400, database failures whatever
 * shared/errors' toHttpError says (constraint → 4xx, unreachable → 503), and anything unexpected a
 * logged 500 that reveals nothing internal. A 500 is logged per occurrence; a 503 of a database
 * that does not answer is reported to `outages` (the process's database OutageLog), which folds an
 * outage's thousands into a few lines and says when the database answers again. On /v1/gql the same answer is in GraphQL's error format;
 * on a route that declares `oauthErrors` (found by `routeOf`), in RFC 6749's (asOAuthError), not cached.
 */
export function errorHandler(
  logger: Logger,
  routeOf?: (ctx: Context) => RouteTraits | undefined,
  outages: OutageLog = databaseOutageLog(logger),
): Middleware {
  return async (ctx, next) => {
    const requestId = requestIdOf(ctx);
    ctx.res.setHeader('X-Request-Id', requestId);
    try {
      await next();
      if (ctx.status === 404 && ctx.body === undefined) {
        throw new HttpError(404, 'NotFound', `no route for ${ctx.method} ${ctx.path}`);
      }
      // The answer's compression (api/compression.ts): most answers are left as they are,
      // synchronously; a compressed one is awaited.
      const compressing = compressAnswer(ctx);
      if (compressing) await compressing;
    } catch (raw) {
      const err = raw as Error & {
        status?: number;
        statusCode?: number;
        type?: string;
        headers?: Record<string, string>;
      };
      const status = err.status ?? err.statusCode;
      let httpErr = toHttpError(err);
      if (!httpErr && status && status >= 400 && status < 500) {
        // http-errors thrown by Koa or a library: keep the status, name it ourselves.
        const badJson =
          err.type === 'entity.parse.failed' || (status === 400 && /JSON|Unexpected|token/i.test(err.message));
        const message = badJson ? badJsonMessage((err as { body?: unknown }).body, err.message) : err.message;
        httpErr = new HttpError(status, errorName(status), message, undefined, err.headers);
      }
      if (!httpErr) {
        logger.error({ err, method: ctx.method, path: loggedPath(ctx), requestId }, 'unhandled error');
        httpErr = new HttpError(
          500,
          'InternalServerError',
          `an unexpected error occurred; quote request id ${requestId} when reporting it`,
        );
      } else if (isDatabaseUnavailable(err)) {
        // One line per outage and reason (with how many requests it stands for), not per request:
        // an outage under load fails a thousand requests a second.
        const reason = databaseFailureReason(err);
        outages.failure('dependency unavailable', reason, { err: reason, method: ctx.method, path: loggedPath(ctx) });
      } else if (httpErr.status === 503 && !(err instanceof HttpError)) {
        logger.warn(
          { err: err.message, method: ctx.method, path: loggedPath(ctx), requestId },
          'dependency unavailable',
        );
      }
      if (routeOf?.(ctx)?.oauthErrors) {
        httpErr = asOAuthError(httpErr);
        ctx.set('Cache-Control', 'no-store');
        ctx.set('Pragma', 'no-cache');
      }
      ctx.status = httpErr.status;
      if (httpErr.headers) ctx.set(answerHeaders(ctx, httpErr.headers));
      // Refused before its body was read (a 415, say): the connection is closed after the answer,
      // or Node would read and discard the rest of the body, unbounded, to reuse it.
      if (!ctx.req.complete) ctx.set('Connection', 'close');
      ctx.body = isRoutePath(ctx.path, GRAPHQL_PATH)
        ? // A GraphQL client reads errors in GraphQL's format, whatever refused the request (rate limit, credentials, body).
          {
            errors: [
              {
                message: httpErr.message,
                extensions: { code: graphqlCode(httpErr.status), status: httpErr.status, ...(httpErr.extra ?? {}) },
              },
            ],
          }
        : { error: httpErr.error, message: httpErr.message, ...(httpErr.extra ?? {}) };
    }
    // Not kept by any cache unless the route says otherwise (its own Cache-Control, or an ETag to
    // revalidate with): answers carry sessions, keys, secrets and personal data.
    // Read off the Node response: Koa's ctx.response.get copies every header into a new object first.
    const res = ctx.res;
    if (!res.hasHeader('Cache-Control') && !res.hasHeader('ETag')) res.setHeader('Cache-Control', 'no-store');
    // Every answer is what its Content-Type says: a browser must not guess HTML or script from a
    // JSON body that echoes input (a 400 naming a value, a stored name).
    ctx.res.setHeader('X-Content-Type-Options', 'nosniff');
    // Small answers of one turn leave together (api/answerTurn.ts).
    if (leavesAtEndOfTurn(ctx.body)) await endOfTurn();
  };
}
