import { setClockOffset } from '../../shared/clock';
import type { Stack } from '../helpers/stack';
import { totpAt } from './totpReference';

/*
 * The api runs in the test's process, so the tests move the service's clock (shared/clock) instead
 * of sleeping: forward one 30-second step for a fresh TOTP code, 10 minutes for an expired setup.
 * Files that use it run their tests serially.
 */
let offsetMs = 0;

export function advanceClock(ms: number): void {
  offsetMs += ms;
  setClockOffset(offsetMs);
}

/** The next time step: a code the service has not seen yet. */
export const nextStep = () => advanceClock(30_000);

/** The service's now. */
export const serviceNow = () => Date.now() + offsetMs;

/** The current code of `secret` by the service's clock, computed independently (RFC 6238 reference). */
export const codeNow = (secret: string, stepsFromNow = 0) => totpAt(secret, serviceNow() + stepsFromNow * 30_000);

/** Sets up and verifies 2FA for the credential's user; returns the secret and the backup codes. */
export async function enableTwoFactor(s: Stack, token: string): Promise<{ secret: string; backupCodes: string[] }> {
  const setup = await s.request('POST', '/v1/users/me/2fa/setup', { token, body: {} });
  if (setup.status !== 200) throw new Error(`setup: ${setup.status} ${setup.text}`);
  nextStep();
  const verify = await s.request('POST', '/v1/users/me/2fa/verify', {
    token,
    body: { code: codeNow(setup.body.secret) },
  });
  if (verify.status !== 200) throw new Error(`verify: ${verify.status} ${verify.text}`);
  nextStep();
  return { secret: setup.body.secret, backupCodes: verify.body.backup_codes };
}
