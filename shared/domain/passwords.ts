import argon2 from 'argon2';

/** Password length bounds (spec §8: at least 8; the cap keeps hashing cost bounded). */
export const PASSWORD_MIN = 8;
export const PASSWORD_MAX = 256;

/** argon2id hash of a password (argon2's defaults: 64 MiB, 3 passes, 4 lanes). */
export function hashPassword(password: string): Promise<string> {
  return argon2.hash(password, { type: argon2.argon2id });
}

let dummyHash: Promise<string> | undefined;

/**
 * Verifies a password. With no hash (unknown email, account without password) it still runs one
 * argon2 verification against a throw-away hash, so response time does not reveal whether the
 * account exists.
 */
export async function verifyPassword(hash: string | null | undefined, password: string): Promise<boolean> {
  if (!hash) {
    dummyHash ??= hashPassword('timing-equaliser-' + Math.random());
    await argon2.verify(await dummyHash, password).catch(() => false);
    return false;
  }
  try {
    return await argon2.verify(hash, password);
  } catch {
    return false;
  }
}
