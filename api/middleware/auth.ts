import type { Context, Middleware, Next } from 'koa';
import type { CredentialResult } from '../../shared/auth/credentials';
import { forbidden, HttpError, unauthorized } from '../../shared/errors';
import { repeatsAuthorization } from '../../shared/httpEdge';
import { ANONYMOUS, systemKeyAllowed } from '../../shared/policies';
import type { AppContext, RouteTraits } from '../routing';

/** Extracts the Bearer token; a malformed Authorization header is a 401, not anonymous access. */
function bearerToken(header: string | undefined): string | null | undefined {
  if (header === undefined || header === '') return null;
  const m = /^Bearer\s+(\S+)\s*$/i.exec(header);
  return m ? m[1] : undefined;
}

/**
 * Resolves the caller once per request into `ctx.state.principal` (X-User-Id is never read).
 * A failed credential is remembered, not thrown, so the rate limiter can count it against the
 * caller's IP before the 401 goes out. Anonymous requests pass without making a promise.
 * An Authorization header that is not a bearer credential (or more than one) is refused, except on a route that
 * authenticates OAuth clients itself (`authenticatesClients` in its definition, found by
 * `routeOf`): the request goes on anonymous, and the header is the route's to check
 * (`ctx.state.clientAuthorization`, HTTP Basic client credentials).
 */
export function authenticate(routeOf?: (ctx: Context) => RouteTraits | undefined): Middleware {
  return (ctx, next) => {
    const c = ctx as unknown as AppContext;
    const header = ctx.get('authorization') || undefined;
    // Two credentials are not one: which would count is a guess a proxy and this process may make differently.
    const repeated = header !== undefined && repeatsAuthorization(ctx.req);
    const token = repeated ? undefined : bearerToken(header);
    c.state.principal = ANONYMOUS;
    if (token === undefined) {
      if (!repeated && routeOf?.(ctx)?.authenticatesClients) {
        c.state.clientAuthorization = header;
        return next();
      }
      (c.state as { authFailure?: HttpError }).authFailure = unauthorized(
        repeated
          ? 'malformed Authorization header: send one Authorization header, not several'
          : 'malformed Authorization header: expected Bearer <token>',
      );
      return next();
    }
    if (!token) return next();
    // Taken before resolving: an invalidation while a load is in flight makes the body's end check again.
    c.state.credentialMark = c.services.credentials.changeMark();
    const resolved = c.services.credentials.resolve(token);
    // A cached credential is resolved synchronously: no promise on the hot path.
    if (!(resolved instanceof Promise)) return accept(c, token, resolved, next);
    return resolved.then((result) => accept(c, token, result, next));
  };
}

/** Sets the principal of a resolved credential (or remembers its failure), then continues. */
function accept(c: AppContext, token: string, result: CredentialResult, next: Next): Promise<unknown> {
  if (result.ok) {
    c.state.principal = result.principal;
    c.state.token = token;
  } else {
    (c.state as { authFailure?: HttpError }).authFailure =
      result.status === 403 ? new HttpError(403, 'Forbidden', result.message) : unauthorized(result.message);
  }
  if (c.state.principal.kind === 'system' && !systemKeyAllowed(c.path)) {
    throw forbidden('system key not permitted on this route');
  }
  return next();
}

/**
 * Checks the credential again once the body is in, when it may have changed while the body was
 * arriving: authentication and rate limiting run before the body is read (so a refused or
 * over-limit request costs no parse, and is counted whatever its body), and a slow upload must not
 * outlive a revocation, a ban or a narrowed grant. No invalidation since the credential was
 * resolved (the usual case) costs nothing; otherwise it is resolved again (a revoked one is a 401,
 * a ban a 403, a changed grant the new principal). Requests without a body skip it.
 */
export function confirmCredential(): Middleware {
  return (ctx, next) => {
    const c = ctx as unknown as AppContext;
    const token = c.state.token;
    if (token === undefined || c.services.credentials.unchangedSince(c.state.credentialMark ?? -1)) return next();
    const m = ctx.method;
    if (m === 'GET' || m === 'HEAD' || m === 'OPTIONS') return next();
    c.state.credentialMark = c.services.credentials.changeMark();
    const resolved = c.services.credentials.resolve(token);
    const confirm = (result: CredentialResult): Promise<unknown> => {
      if (!result.ok)
        throw result.status === 403 ? new HttpError(403, 'Forbidden', result.message) : unauthorized(result.message);
      c.state.principal = result.principal;
      return next();
    };
    return resolved instanceof Promise ? resolved.then(confirm) : confirm(resolved);
  };
}

/** Raises the remembered credential failure (after rate limiting has counted it). */
export function rejectFailedCredentials(): Middleware {
  return (ctx, next) => {
    const failure = (ctx.state as { authFailure?: HttpError }).authFailure;
    if (failure) throw failure;
    return next();
  };
}
