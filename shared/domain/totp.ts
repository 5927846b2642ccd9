import { createHmac, randomBytes, randomInt } from 'node:crypto';
import argon2 from 'argon2';
import { safeEqual, sha256 } from '../crypto';

/** RFC 6238 TOTP as authenticator apps use it: SHA-1, 6 digits, 30-second steps. */
export const TOTP = { digits: 6, stepSeconds: 30, /** steps of clock drift accepted either side */ drift: 1 } as const;

const B32 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZ234567';

export function base32Encode(buf: Buffer): string {
  let bits = 0;
  let value = 0;
  let out = '';
  for (const byte of buf) {
    value = (value << 8) | byte;
    bits += 8;
    while (bits >= 5) {
      out += B32[(value >>> (bits - 5)) & 31];
      bits -= 5;
    }
  }
  if (bits > 0) out += B32[(value << (5 - bits)) & 31];
  return out;
}

export function base32Decode(s: string): Buffer {
  const clean = s.replace(/=+$/, '').toUpperCase();
  const out: number[] = [];
  let bits = 0;
  let value = 0;
  for (const ch of clean) {
    const i = B32.indexOf(ch);
    if (i < 0) throw new Error('invalid base32');
    value = (value << 5) | i;
    bits += 5;
    if (bits >= 8) {
      out.push((value >>> (bits - 8)) & 255);
      bits -= 8;
    }
  }
  return Buffer.from(out);
}

/** A new 160-bit secret, base32 (RFC 4226's recommended length). */
export function newTotpSecret(): string {
  return base32Encode(randomBytes(20));
}

/** The time step of a moment (ms since the epoch). */
export const totpStep = (nowMs: number) => Math.floor(nowMs / 1000 / TOTP.stepSeconds);

/** HOTP (RFC 4226) of one counter value. */
export function hotp(secret: Buffer, counter: number): string {
  const msg = Buffer.alloc(8);
  msg.writeBigUInt64BE(BigInt(counter));
  const mac = createHmac('sha1', secret).update(msg).digest();
  const offset = mac[mac.length - 1] & 0x0f;
  const bin = mac.readUInt32BE(offset) & 0x7fffffff;
  return String(bin % 10 ** TOTP.digits).padStart(TOTP.digits, '0');
}

/**
 * The time step whose code `code` is, within ±TOTP.drift steps of `nowMs`, or null. Every
 * candidate is computed and compared in constant time (no early return on a match), so the timing
 * says nothing about which one.
 */
export function matchTotp(secretBase32: string, code: string, nowMs: number): number | null {
  if (!/^\d{6}$/.test(code)) return null;
  const secret = base32Decode(secretBase32);
  const now = totpStep(nowMs);
  let found: number | null = null;
  for (let d = -TOTP.drift; d <= TOTP.drift; d++) {
    if (safeEqual(hotp(secret, now + d), code) && found === null) found = now + d;
  }
  return found;
}

/** The otpauth:// URI authenticator apps read from the QR code. */
export function otpauthUri(secretBase32: string, issuer: string, account: string): string {
  const label = encodeURIComponent(`${issuer}:${account}`);
  const q = new URLSearchParams({
    secret: secretBase32,
    issuer,
    algorithm: 'SHA1',
    digits: String(TOTP.digits),
    period: String(TOTP.stepSeconds),
  });
  return `otpauth://totp/${label}?${q.toString()}`;
}

/** Backup codes: 10 at a time (spec §8), `xxxx-xxxx` from an alphabet without look-alikes. */
export const BACKUP_CODE_COUNT = 10;
const BACKUP_ALPHABET = 'abcdefghjkmnpqrstuvwxyz23456789';

export function newBackupCodes(n = BACKUP_CODE_COUNT): string[] {
  const one = () => Array.from({ length: 8 }, () => BACKUP_ALPHABET[randomInt(BACKUP_ALPHABET.length)]).join('');
  return Array.from({ length: n }, () => {
    const c = one();
    return `${c.slice(0, 4)}-${c.slice(4)}`;
  });
}

/** A backup code as typed (any case, with or without the dash), or null when it cannot be one. */
export function normaliseBackupCode(code: string): string | null {
  const c = code.trim().toLowerCase().replace(/[\s-]/g, '');
  return /^[a-z0-9]{8}$/.test(c) ? c : null;
}

/**
 * How a backup code is stored: one-way, salted and slow. A code is 8 characters of 31 (about 40
 * bits), few enough that a fast unsalted hash of a leaked table is reversed by trying them all; so
 * it is argon2id (4 MiB, 3 passes: about 9 ms here) salted with the owner's id, 64 hex characters.
 * One hash per attempt; the 10 of a new set are computed in parallel on libuv's pool.
 */
export async function hashBackupCode(userId: string, normalised: string): Promise<string> {
  const raw = await argon2.hash(normalised, {
    type: argon2.argon2id,
    raw: true,
    salt: Buffer.from(`2fa-backup:${userId}`),
    memoryCost: 4096,
    timeCost: 3,
    parallelism: 1,
    hashLength: 32,
  });
  return raw.toString('hex');
}

/** The form codes issued before argon2id were stored in (SHA-256, unsalted): still accepted until used or replaced. */
export const legacyBackupCodeHash = (normalised: string) => sha256(`2fa-backup:${normalised}`);
