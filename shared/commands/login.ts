import type { ServiceContext } from '../context';
import { User } from '../models/User';
import { sessionLifetimeMs } from '../queries/accountSettings';
import { recordAuditEvent } from '../audit';
import { createSession } from './sessions';
import { flatUser } from '../queries/users';

/** Who is signing in and from where. */
export interface LoginAttempt {
  userId: string;
  /** Platform of the credential that was checked (`email` for password sign-in). */
  platformSlug: string;
  ipAddress: string | null;
  userAgent: string | null;
}

/** What a gate answers instead of a session: the 2FA challenge of decisions.md. */
export interface LoginChallenge {
  requires_two_factor: true;
  challenge_token: string;
  expires_at: string;
}

/**
 * A check that runs after the password was accepted and before a session exists. It returns a
 * challenge to stop the sign-in there (no session is created), or null to let it through. The
 * two-factor feature adds its gate here (one line) and, once the code is checked at
 * POST /v1/auth/2fa/check, finishes the sign-in with `completeLogin`.
 */
export type LoginGate = (ctx: ServiceContext, attempt: LoginAttempt) => Promise<LoginChallenge | null>;

/** Registry of sign-in gates, run in order; the first challenge wins. */
export const loginGates: LoginGate[] = [];

/** Runs the gates; returns the first challenge, or null when sign-in may complete. */
export async function runLoginGates(ctx: ServiceContext, attempt: LoginAttempt): Promise<LoginChallenge | null> {
  for (const gate of loginGates) {
    const challenge = await gate(ctx, attempt);
    if (challenge) return challenge;
  }
  return null;
}

/**
 * Finishes a sign-in: creates the session (lifetime from system config), stamps last_login_at,
 * writes the `login` audit event and answers `{data: flattened user, session}`.
 */
export async function completeLogin(ctx: ServiceContext, attempt: LoginAttempt) {
  const expires = new Date(Date.now() + (await sessionLifetimeMs(ctx.db)));
  const { session, token } = await ctx.db.transaction(async (trx) => {
    const created = await createSession(attempt.userId, expires, { ipAddress: attempt.ipAddress, userAgent: attempt.userAgent, platformSlug: attempt.platformSlug }, trx);
    await User.query(trx).patch({ last_login_at: new Date() }).where('id', attempt.userId);
    await recordAuditEvent(
      {
        user_id: attempt.userId,
        event_type: 'login',
        resource_type: 'session',
        resource_id: created.session.id,
        actor_id: attempt.userId,
        ip_address: attempt.ipAddress,
        user_agent: attempt.userAgent,
        metadata: { platform: attempt.platformSlug, session_id: created.session.id },
      },
      trx,
    );
    return created;
  });
  return { data: await flatUser(ctx.db, attempt.userId), session: { sessionToken: token, expires: session.expires_at.toISOString() } };
}
