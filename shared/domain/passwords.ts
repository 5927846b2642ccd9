import argon2 from 'argon2';
import { DEFAULT_PASSWORD_HASHING, type PasswordHashing } from '../config';

/** Password length bounds (spec §8: at least 8; the cap keeps hashing cost bounded). */
export const PASSWORD_MIN = 8;
export const PASSWORD_MAX = 256;

let hashing: PasswordHashing = DEFAULT_PASSWORD_HASHING;
let dummyHash: Promise<string> | undefined;

/**
 * Sets the cost of the hashes this process writes from now on (each process calls it with its
 * configuration at start). A stored hash carries its own parameters, so hashes written with
 * another cost still verify.
 */
export function configurePasswordHashing(next: PasswordHashing): void {
  if (
    next.memoryCost === hashing.memoryCost &&
    next.timeCost === hashing.timeCost &&
    next.parallelism === hashing.parallelism
  )
    return;
  hashing = { ...next };
  // The throw-away hash of verifyPassword costs what a real one does.
  dummyHash = undefined;
}

/** argon2id hash of a password, at the configured cost. */
export function hashPassword(password: string): Promise<string> {
  return argon2.hash(password, { type: argon2.argon2id, ...hashing });
}

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
