import { createHmac, randomBytes } from 'node:crypto';
import type Redis from 'ioredis';
import { safeEqual } from '../crypto';
import { redisKey, RedisKeys } from '../redis';
import { isUuid } from '../zod';

/**
 * X-ID-App-Assertion (spec §5.8): how a first-party internal app (the ID app) acts for a signed-in
 * user without holding a user token. Format: `<app_id>.<subject_uuid>.<issued_at_unix>.<nonce>.<hmac>`,
 * the HMAC-SHA256 (base64url, no padding) of `<app_id>|<subject>|<issued_at>|<nonce>` under the app's
 * secret from ID_APPS. Each assertion is good for one request only.
 */

export const ASSERTION_HEADER = 'x-id-app-assertion';
const ASSERTION_NONCE_PREFIX = 'idaa_';

const UNIX_SECONDS = /^(0|[1-9][0-9]{0,11})$/;
const NONCE = /^idaa_[A-Za-z0-9_-]{8,128}$/;
/** HMAC-SHA256 is 32 bytes: 43 base64url characters without padding. */
const SIGNATURE = /^[A-Za-z0-9_-]{43}$/;

export type AssertionFailure =
  'malformed' | 'unknown_app' | 'bad_signature' | 'stale' | 'future' | 'replayed' | 'unavailable';

export type AssertionResult =
  | { ok: true; appId: string; subject: string; issuedAt: number; nonce: string }
  | { ok: false; reason: AssertionFailure; message: string };

export interface AssertionConfig {
  idApps: Map<string, string>;
  idAssertionMaxAgeSeconds: number;
  idAssertionClockSkewSeconds: number;
  redisPrefix: string;
}

function signature(secret: string, appId: string, subject: string, issuedAt: string, nonce: string): string {
  return createHmac('sha256', secret).update(`${appId}|${subject}|${issuedAt}|${nonce}`).digest('base64url');
}

const fail = (reason: AssertionFailure, message: string): AssertionResult => ({ ok: false, reason, message });

/**
 * Verifies an assertion by rules (a)-(e) of spec §5.8 and, on success, claims its nonce in Redis
 * (SET NX EX), so the same assertion is refused on every api instance afterwards. Redis being
 * unreachable fails closed ('unavailable'): a replay check that cannot run is not a pass.
 */
export async function verifyAppAssertion(
  config: AssertionConfig,
  redis: Redis,
  token: string | undefined | null,
  nowMs = Date.now(),
): Promise<AssertionResult> {
  if (!token) return fail('malformed', 'X-ID-App-Assertion header is missing');
  if (token.length > 512) return fail('malformed', 'assertion is too long');
  const fields = token.split('.');
  if (fields.length !== 5 || fields.some((f) => f === ''))
    return fail('malformed', 'assertion must have exactly five dot-separated fields');
  const [appId, subject, issuedAtRaw, nonce, mac] = fields;

  // (a) a configured internal app
  const secret = config.idApps.get(appId);
  if (secret === undefined) return fail('unknown_app', 'unknown app_id');
  // (b) canonical lowercase hyphenated UUID subject; the other fields well-formed
  if (!(isUuid(subject) && subject === subject.toLowerCase()))
    return fail('malformed', 'subject must be a canonical lowercase hyphenated UUID');
  if (!UNIX_SECONDS.test(issuedAtRaw)) return fail('malformed', 'issued_at must be Unix seconds');
  if (!NONCE.test(nonce)) return fail('malformed', `nonce must start with ${ASSERTION_NONCE_PREFIX}`);
  if (!SIGNATURE.test(mac)) return fail('malformed', 'signature must be unpadded base64url HMAC-SHA256');

  // (c) the per-app secret, compared in constant time: one app's assertion is void for another
  if (!safeEqual(signature(secret, appId, subject, issuedAtRaw, nonce), mac))
    return fail('bad_signature', 'signature does not match');

  // (d) freshness window and clock-skew tolerance
  const issuedAt = Number(issuedAtRaw);
  const nowSeconds = nowMs / 1000;
  if (issuedAt - nowSeconds > config.idAssertionClockSkewSeconds)
    return fail('future', 'assertion is dated in the future');
  if (nowSeconds - issuedAt > config.idAssertionMaxAgeSeconds) return fail('stale', 'assertion is too old');

  // (e) single use: the nonce is claimed for as long as the assertion could still pass (d)
  const ttl = config.idAssertionMaxAgeSeconds + config.idAssertionClockSkewSeconds + 1;
  let claimed: string | null;
  try {
    claimed = await redis.set(
      redisKey(config, RedisKeys.assertionNonce(nonce)),
      `${appId}:${subject}`,
      'EX',
      ttl,
      'NX',
    );
  } catch {
    return fail('unavailable', 'assertion replay check unavailable');
  }
  if (claimed !== 'OK') return fail('replayed', 'assertion was already used');
  return { ok: true, appId, subject, issuedAt, nonce };
}

/**
 * Finds which configured app a raw X-ID-App-Key belongs to. Every secret is compared in constant
 * time, without an early exit, so timing reveals neither a match nor which app matched.
 */
export function appForKey(config: Pick<AssertionConfig, 'idApps'>, key: string | undefined | null): string | null {
  if (!key) return null;
  let found: string | null = null;
  for (const [appId, secret] of config.idApps) {
    if (safeEqual(secret, key) && found === null) found = appId;
  }
  return found;
}

/**
 * Builds an assertion the way the ID app does (used by tests and first-party tooling).
 * `issuedAt` is Unix seconds (default now); the nonce gets the idaa_ prefix when not given.
 */
export function signAppAssertion(opts: {
  appId: string;
  secret: string;
  subject: string;
  issuedAt?: number;
  nonce?: string;
}): string {
  const issuedAt = String(opts.issuedAt ?? Math.floor(Date.now() / 1000));
  const nonce = opts.nonce ?? ASSERTION_NONCE_PREFIX + randomBytes(16).toString('base64url');
  return [
    opts.appId,
    opts.subject,
    issuedAt,
    nonce,
    signature(opts.secret, opts.appId, opts.subject, issuedAt, nonce),
  ].join('.');
}
