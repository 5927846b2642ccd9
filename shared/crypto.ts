import { createCipheriv, createDecipheriv, createHash, randomBytes, timingSafeEqual } from 'node:crypto';

/** SHA-256 hex digest: how API keys, session tokens, client secrets and one-time tokens are stored. */
export function sha256(value: string): string {
  return createHash('sha256').update(value).digest('hex');
}

/** A URL-safe random token with an optional readable prefix, e.g. `sk_…`. */
export function randomToken(prefix = '', bytes = 32): string {
  return prefix + randomBytes(bytes).toString('base64url');
}

/** Constant-time string comparison that does not leak length through an early return. */
export function safeEqual(a: string, b: string): boolean {
  const ab = Buffer.from(a);
  const bb = Buffer.from(b);
  if (ab.length !== bb.length) {
    timingSafeEqual(ab, ab);
    return false;
  }
  return timingSafeEqual(ab, bb);
}

/**
 * AES-256-GCM for secrets the service must read back (TOTP secrets, OAuth tokens).
 * Output: base64 of iv(12) | tag(16) | ciphertext, prefixed with a version marker.
 */
export function encryptSecret(plain: string, key: Buffer): string {
  const iv = randomBytes(12);
  const cipher = createCipheriv('aes-256-gcm', key, iv);
  const body = Buffer.concat([cipher.update(plain, 'utf8'), cipher.final()]);
  return 'v1:' + Buffer.concat([iv, cipher.getAuthTag(), body]).toString('base64');
}

/** Reverses encryptSecret; throws when the data was tampered with or the key is wrong. */
export function decryptSecret(sealed: string, key: Buffer): string {
  if (!sealed.startsWith('v1:')) throw new Error('unknown secret format');
  const raw = Buffer.from(sealed.slice(3), 'base64');
  const decipher = createDecipheriv('aes-256-gcm', key, raw.subarray(0, 12));
  decipher.setAuthTag(raw.subarray(12, 28));
  return Buffer.concat([decipher.update(raw.subarray(28)), decipher.final()]).toString('utf8');
}
