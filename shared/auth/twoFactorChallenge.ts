import { clock } from '../clock';
import type { Config } from '../config';
import type { ServiceContext } from '../context';
import { randomBytes } from 'node:crypto';
import { decryptSecret, encryptSecret, sha256 } from '../crypto';
import { twoFactorEnabled } from '../queries/twoFactor';

/** How long a sign-in challenge may be answered at POST /v1/auth/2fa/check. */
export const CHALLENGE_TTL_MS = 5 * 60 * 1000;
const PREFIX = 'tfc_';

interface ChallengeClaims {
  /** user id */
  u: string;
  /** platform of the credential that was checked */
  p: string;
  /** expiry, ms since the epoch */
  e: number;
  /** stamp of the credential that was checked (`credentialStamp`), when it has one */
  c?: string;
  /** random: two challenges never have the same claims, so the claims name the challenge */
  n?: string;
}

/**
 * The login challenge token: the claims sealed with SECRETS_KEY (AES-256-GCM, so it can be neither
 * read nor forged), base64url. Nothing is stored: any api instance can open it, with or without
 * Redis. It proves only that the password was right; the session needs the second factor too.
 */
export function issueChallenge(
  config: Pick<Config, 'secretKeys'>,
  userId: string,
  platformSlug: string,
  credentialStamp?: string,
) {
  const expires = clock.now() + CHALLENGE_TTL_MS;
  const claims: ChallengeClaims = {
    u: userId,
    p: platformSlug,
    e: expires,
    c: credentialStamp,
    n: randomBytes(12).toString('base64url'),
  };
  return {
    token: PREFIX + Buffer.from(encryptSecret(JSON.stringify(claims), config.secretKeys)).toString('base64url'),
    expiresAt: new Date(expires),
  };
}

/**
 * A short digest of a password hash: a challenge carries it, so a password changed or reset after
 * the challenge was issued voids it (the reset ends every sign-in, also one halfway through).
 */
export const credentialStamp = (passwordHash: string) => sha256(`challenge:${passwordHash}`).slice(0, 22);

/**
 * The challenge's user, platform and credential stamp, and `id`, what a check spends: or null when
 * the token is not one of ours or has expired. The id is the digest of the opened claims, not of
 * the token's text: base64 decoding skips stray characters, so many spellings of one token open
 * to the same claims, and each would otherwise be a new challenge to spend.
 */
export function openChallenge(
  config: Pick<Config, 'secretKeys'>,
  token: string,
): { id: string; userId: string; platformSlug: string; credentialStamp?: string } | null {
  if (!token.startsWith(PREFIX)) return null;
  try {
    const text = decryptSecret(
      Buffer.from(token.slice(PREFIX.length), 'base64url').toString('utf8'),
      config.secretKeys,
    );
    const claims = JSON.parse(text) as ChallengeClaims;
    if (typeof claims.u !== 'string' || typeof claims.e !== 'number' || claims.e <= clock.now()) return null;
    return {
      id: sha256(`challenge-claims:${text}`),
      userId: claims.u,
      platformSlug: claims.p,
      credentialStamp: claims.c,
    };
  } catch {
    return null;
  }
}

/**
 * The sign-in gate of two-factor authentication (shared/commands/login.ts `loginGates`): an account
 * with 2FA enabled gets the challenge of decisions.md instead of a session.
 */
export async function twoFactorLoginGate(
  ctx: ServiceContext,
  attempt: { userId: string; platformSlug: string; credentialStamp?: string },
): Promise<{ requires_two_factor: true; challenge_token: string; expires_at: string } | null> {
  if (!(await twoFactorEnabled(ctx.db, attempt.userId))) return null;
  const { token, expiresAt } = issueChallenge(
    ctx.config,
    attempt.userId,
    attempt.platformSlug,
    attempt.credentialStamp,
  );
  return { requires_two_factor: true, challenge_token: token, expires_at: expiresAt.toISOString() };
}
