import { createHmac } from 'node:crypto';

/*
 * An independent RFC 6238 implementation for the tests (not the service's shared/domain/totp):
 * SHA-1, 6 digits, 30-second steps, secrets in RFC 4648 base32.
 */

function base32ToBytes(s: string): Buffer {
  const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZ234567';
  let bits = '';
  for (const ch of s.replace(/=+$/, '').toUpperCase()) {
    const v = alphabet.indexOf(ch);
    if (v < 0) throw new Error(`not base32: ${ch}`);
    bits += v.toString(2).padStart(5, '0');
  }
  const bytes: number[] = [];
  for (let i = 0; i + 8 <= bits.length; i += 8) bytes.push(parseInt(bits.slice(i, i + 8), 2));
  return Buffer.from(bytes);
}

/** The TOTP code of `secret` at `atMs` (ms since the epoch). */
export function totpAt(secret: string, atMs: number): string {
  const counter = Math.floor(atMs / 1000 / 30);
  const msg = Buffer.alloc(8);
  msg.writeUInt32BE(Math.floor(counter / 2 ** 32), 0);
  msg.writeUInt32BE(counter % 2 ** 32, 4);
  const h = createHmac('sha1', base32ToBytes(secret)).update(msg).digest();
  const o = h[19] & 0xf;
  const n = ((h[o] & 0x7f) << 24) | (h[o + 1] << 16) | (h[o + 2] << 8) | h[o + 3];
  return String(n % 1_000_000).padStart(6, '0');
}

/** Waits until the current 30-second step has at least `marginMs` left, so a code does not roll over mid-test. */
export async function awayFromStepEdge(marginMs = 3000, offsetMs = 0): Promise<void> {
  const into = (Date.now() + offsetMs) % 30_000;
  if (30_000 - into < marginMs) await new Promise((r) => setTimeout(r, 30_000 - into + 50));
}
