import { isUtf8 } from 'node:buffer';
import { createHash } from 'node:crypto';
import { HttpError } from '../errors';

/** Pure OAuth 2.0 rules and formats of the provider (decisions.md): errors, redirect URIs, scopes, PKCE. */

/** RFC 6749 §5.2 error: the `error` field carries the OAuth error code, `message` the reason. */
export function oauthError(status: 400 | 401, code: string, message: string): HttpError {
  return new HttpError(status, code, message, { error_description: message });
}

/** The error codes of the token endpoint (RFC 6749 §5.2). */
const TOKEN_ERRORS = new Set([
  'invalid_request',
  'invalid_client',
  'invalid_grant',
  'unauthorized_client',
  'unsupported_grant_type',
  'invalid_scope',
]);

/**
 * A refusal as an endpoint of RFC 6749 §5.2 answers it: a malformed request (a missing, repeated
 * or invalid parameter, a body that does not parse or is of a type not taken: the service's 400 and
 * 415) is 400 invalid_request, its message the error_description (validation `details` kept).
 * OAuth errors, and refusals that are not about the request's form (credentials, size, rate limit,
 * outages), stay as they are.
 */
export function asOAuthError(err: HttpError): HttpError {
  if (TOKEN_ERRORS.has(err.error) || (err.status !== 400 && err.status !== 415)) return err;
  return new HttpError(
    400,
    'invalid_request',
    err.message,
    { ...err.extra, error_description: err.message },
    err.headers,
  );
}

/** An OAuth client's credentials as an `Authorization: Basic` header carries them. */
export interface ClientCredentials {
  clientId: string;
  clientSecret: string;
}

/** One form-urlencoded value (`+` a space, percent-escapes of UTF-8), or null when it does not decode. */
function formDecoded(value: string): string | null {
  try {
    return decodeURIComponent(value.replace(/\+/g, ' '));
  } catch {
    return null;
  }
}

/**
 * The client credentials of an Authorization header (RFC 6749 §2.3.1): scheme `Basic`, then the
 * base64 of `client_id:client_secret`, each form-urlencoded before they were joined (Appendix B),
 * so a colon inside either arrives as `%3A`. Null for another scheme or a value that does not
 * decode: the token endpoint answers invalid_client to it, as to wrong credentials.
 */
export function basicClientCredentials(header: string): ClientCredentials | null {
  const m = /^Basic\s+([A-Za-z0-9+/]+={0,2})\s*$/i.exec(header);
  if (!m || m[1].length % 4 === 1) return null;
  const bytes = Buffer.from(m[1], 'base64');
  if (!isUtf8(bytes)) return null;
  const text = bytes.toString('utf8');
  const colon = text.indexOf(':');
  if (colon < 0) return null;
  const clientId = formDecoded(text.slice(0, colon));
  const clientSecret = formDecoded(text.slice(colon + 1));
  return clientId === null || clientSecret === null ? null : { clientId, clientSecret };
}

/** Why a redirect URI is not acceptable, or null: absolute https, or http on localhost only. */
export function redirectUriProblem(uri: string): string | null {
  let u: URL;
  try {
    u = new URL(uri);
  } catch {
    return 'must be an absolute URL';
  }
  if (uri.includes('#')) return 'must not contain a fragment';
  if (u.username || u.password) return 'must not contain credentials';
  if (u.protocol === 'https:' && u.hostname) return null;
  if (u.protocol === 'http:' && (u.hostname === 'localhost' || u.hostname === '127.0.0.1')) return null;
  return 'must use https (http only on localhost or 127.0.0.1)';
}

/** `scope` parameter → distinct scopes (space separated, RFC 6749 §3.3). */
export function parseScopeParam(scope: string | undefined): string[] | null {
  if (scope === undefined) return null;
  return [...new Set(scope.split(/\s+/).filter(Boolean))];
}

/** RFC 7636 §4.1: a code verifier is 43-128 characters of the unreserved set. */
export const PKCE_VERIFIER = /^[A-Za-z0-9\-._~]{43,128}$/;

/** RFC 7636 S256: BASE64URL(SHA256(ASCII(code_verifier))). */
export function pkceChallenge(verifier: string): string {
  return createHash('sha256').update(verifier, 'ascii').digest('base64url');
}

/** The token endpoint's answer (RFC 6749 §5.1). */
export interface TokenResponse {
  access_token: string;
  token_type: 'Bearer';
  expires_in: number;
  refresh_token: string;
  scope: string;
}
