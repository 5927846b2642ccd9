import type { Knex } from 'knex';
import QRCode from 'qrcode';
import { attributed, recordAuditEvent } from '../audit';
import { releaseAttempt, reserveIpAttempt } from '../caches/loginThrottle';
import {
  clearTwoFactorFailures,
  claimTotpStep,
  giveBackTwoFactorAttempt,
  reserveTwoFactorAttempt,
  TWO_FACTOR_THROTTLE,
} from '../caches/twoFactorThrottle';
import { clock } from '../clock';
import type { ServiceContext } from '../context';
import { decryptSecret, encryptSecret, sha256 } from '../crypto';
import { afterCommit, transaction } from '../db';
import {
  hashBackupCode,
  legacyBackupCodeHash,
  matchTotp,
  newBackupCodes,
  newTotpSecret,
  normaliseBackupCode,
  otpauthUri,
} from '../domain/totp';
import { emailLocale } from '../emails/accountEmails';
import { writeNoticeEmail } from '../emails/outbox';
import { renderTwoFactorEmail, TwoFactorEmailTemplate } from '../emails/twoFactorEmails';
import { badRequest, HttpError, notFound, tooManyRequests } from '../errors';
import { User } from '../models/User';
import { UserTwoFactor } from '../models/UserTwoFactor';
import { noticeAddress, twoFactorState, TwoFactorState } from '../queries/twoFactor';
import { emailPlatform, findPlatform } from '../queries/users';
import type { EmailRequest } from './emailFlows';

/** A pending setup must be verified within this time (spec §3, §8). */
export const SETUP_TTL_MS = 10 * 60 * 1000;
/** The issuer authenticator apps show next to the account. */
export const TOTP_ISSUER = 'Service';

export const INVALID_CODE = 'code: invalid code';

/** Who acts (the caller) and from where, with the language their client prefers (for the mails). */
export type TwoFactorActor = EmailRequest;

/** The 429 of a refused code check; `limit` is the maximum of the lock-out that refused it (per account by default). */
export function tooManyCodeAttempts(seconds: number, limit: number = TWO_FACTOR_THROTTLE.maxFailures): HttpError {
  return tooManyRequests(`too many wrong two-factor codes; try again in ${seconds} seconds`, limit, seconds);
}

async function liveUser(db: Knex, userId: string): Promise<User> {
  const user = await User.query(db).findById(userId).whereNull('deleted_at');
  if (!user) throw notFound('user');
  return user;
}

const isEnabled = (s: TwoFactorState) => !!s.row?.enabled_at;

/**
 * POST 2fa/setup: a new secret (sealed with SECRETS_KEY) pending for 10 minutes, from a platform
 * that supports 2FA (the email platform by default). A new setup replaces a pending one.
 */
export async function setupTwoFactor(ctx: ServiceContext, userId: string, platformRef: string | null | undefined) {
  const user = await liveUser(ctx.db, userId);
  const platform = platformRef ? await findPlatform(ctx.db, platformRef) : await emailPlatform(ctx.db);
  // A platform the body names that does not exist is bad input (a reference to a missing record).
  if (!platform) throw platformRef ? badRequest('platform_id: no such platform') : notFound('platform');
  if (!platform.two_factor_supported)
    throw badRequest(`platform_id: ${platform.name} does not support two-factor authentication`);
  const secret = newTotpSecret();
  const now = clock.now();
  const expiresAt = new Date(now + SETUP_TTL_MS);
  // One statement, in the command's transaction like every write: an enabled row is never replaced.
  const stored = await transaction(ctx.db, (trx) =>
    trx('user_two_factor')
      .insert({
        user_id: userId,
        secret_encrypted: encryptSecret(secret, ctx.config.secretKeys),
        platform_id: platform.id,
        setup_expires_at: expiresAt,
        enabled_at: null,
        last_step: null,
      })
      .onConflict('user_id')
      .merge(['secret_encrypted', 'platform_id', 'setup_expires_at', 'last_step', 'updated_at'])
      .where('user_two_factor.enabled_at', null)
      .returning('user_id'),
  );
  if (stored.length === 0) throw badRequest('two-factor authentication is already enabled');
  const account = (await noticeAddress(ctx.db, userId)) ?? user.username;
  const uri = otpauthUri(secret, TOTP_ISSUER, account);
  return {
    secret,
    qr_code_url: uri,
    qr_code_image: await QRCode.toDataURL(uri, { errorCorrectionLevel: 'M', margin: 2, width: 256 }),
    expires_at: expiresAt.toISOString(),
    platform_slug: platform.slug,
  };
}

type CodeMatch = { kind: 'totp'; step: number } | { kind: 'backup'; id: string };
/** A right code used already (its time step accepted, or a spent backup code): no guess, and refused. */
type CodeReplay = { kind: 'replay' };

/** Whether `code` is a TOTP code of `row`'s secret now: no claim, no lock (the check before the lock). */
const totpMatches = (ctx: ServiceContext, row: UserTwoFactor, code: string) =>
  matchTotp(decryptSecret(row.secret_encrypted, ctx.config.secretKeys), code.trim(), clock.now()) !== null;

/**
 * Checks a code against the locked row: a TOTP code within ±1 step that is newer than the last one
 * accepted (and, across instances, claimed first in Redis), or an unused backup code (spent here).
 */
async function matchCode(
  ctx: ServiceContext,
  trx: Knex.Transaction,
  row: UserTwoFactor,
  code: string,
  backupHash: string | null,
): Promise<CodeMatch | CodeReplay | null> {
  const trimmed = code.trim();
  const secret = decryptSecret(row.secret_encrypted, ctx.config.secretKeys);
  const step = matchTotp(secret, trimmed, clock.now());
  if (step !== null) {
    const last = row.last_step === null ? null : Number(row.last_step);
    if (last !== null && step <= last) return { kind: 'replay' };
    // Claimed per user and secret: a fresh secret (a new setup) does not inherit the old one's claims.
    if (!(await claimTotpStep(ctx.redis, ctx.config, `${row.user_id}:${sha256(secret).slice(0, 12)}`, step)))
      return { kind: 'replay' };
    await trx('user_two_factor').where('user_id', row.user_id).update({ last_step: step });
    return { kind: 'totp', step };
  }
  // Set for a code of a backup code's form when backup codes are allowed (withTwoFactorCode).
  if (backupHash === null) return null;
  const backup = normaliseBackupCode(trimmed)!;
  const hashes = [backupHash, legacyBackupCodeHash(backup)];
  const spent = await trx('two_factor_backup_codes')
    .where('user_id', row.user_id)
    .whereIn('code_hash', hashes)
    .whereNull('used_at')
    .update({ used_at: clock.date() })
    .returning('id');
  if (spent.length) return { kind: 'backup', id: spent[0].id as string };
  const used = await trx('two_factor_backup_codes')
    .where('user_id', row.user_id)
    .whereIn('code_hash', hashes)
    .first('id');
  return used ? { kind: 'replay' } : null;
}

/**
 * The one way a code is checked: counted first (lock-out, 429 with Retry-After), then matched
 * under the row lock; a wrong code commits a `login_failed` audit event and answers 400; a right
 * one runs `onMatch` in the same transaction and clears the failure count.
 *
 * The slow work (argon2id, about 9 ms a hash) runs before the row is locked, so a transaction
 * holds its pooled connection and the lock for a few statements, not for ten hashes: the hash of a
 * submitted backup code, and `prepare` (a new set of backup codes) when the code matches the state
 * read before the lock. The match under the lock decides; in the rare case it accepts a code the
 * first read did not (the secret changed in between), `prepare` runs there.
 */
export async function withTwoFactorCode<T, P = undefined>(
  ctx: ServiceContext,
  userId: string,
  code: string,
  by: TwoFactorActor,
  op: string,
  opts: { allowBackup: boolean; state: (s: TwoFactorState) => void; prepare?: () => Promise<P> },
  onMatch: (trx: Knex.Transaction, s: TwoFactorState, m: CodeMatch, prepared: P) => Promise<T>,
): Promise<T> {
  // State errors (nothing pending, not enabled) are not guesses: answered before anything counts.
  const before = await twoFactorState(ctx.db, userId);
  opts.state(before);
  // Per IP first (the sign-in counter failed passwords use), then per account: a refusal counts nowhere.
  const ipReservation = by.ipAddress ? await reserveIpAttempt(ctx.db, by.ipAddress) : null;
  const ipRefused = ipReservation !== null && ipReservation.retryAfterSeconds > 0;
  const reservation = ipRefused ? { ...ipReservation, userId } : await reserveTwoFactorAttempt(ctx.db, userId);
  /** The `login_failed` event of a refused check. */
  const failure = (error: string, reason: string) =>
    attributed(
      { ...by, actorId: by.actorId ?? userId },
      {
        user_id: userId,
        event_type: 'login_failed',
        status: 'failure',
        error_message: error,
        metadata: { reason, operation: op },
      },
    );
  if (reservation.retryAfterSeconds > 0) {
    if (ipReservation) await releaseAttempt(ctx.db, ipReservation);
    await recordAuditEvent(failure('too_many_attempts', 'too_many_2fa_attempts'), ctx.db);
    throw tooManyCodeAttempts(reservation.retryAfterSeconds, ipRefused ? ipReservation.limit : undefined);
  }
  // A check that fails other than by a wrong code (the state changed meanwhile: a parallel request
  // enabled 2FA; the database failed; the right code again) was no guess: its attempts are given back.
  const giveBack = async () => {
    await giveBackTwoFactorAttempt(ctx.db, reservation);
    if (ipReservation) await releaseAttempt(ctx.db, ipReservation);
  };
  let wrong = false;
  const outcome = await (async () => {
    const backup = opts.allowBackup ? normaliseBackupCode(code) : null;
    const backupHash = backup ? await hashBackupCode(userId, backup) : null;
    let prepared: { value: P } | undefined;
    if (opts.prepare && before.row && totpMatches(ctx, before.row, code)) prepared = { value: await opts.prepare() };
    return transaction(ctx.db, async (trx) => {
      const s = await twoFactorState(trx, userId, { forUpdate: true });
      opts.state(s);
      const m = await matchCode(ctx, trx, s.row!, code, backupHash);
      // The right code again (a double submit, a retry): refused, but no guess (not counted, no event).
      if (m?.kind === 'replay') return { ok: false as const, replay: true };
      if (!m) {
        wrong = true;
        await recordAuditEvent(failure('wrong_2fa_code', 'wrong_2fa_code'), trx);
        return { ok: false as const };
      }
      prepared ??= { value: opts.prepare ? await opts.prepare() : (undefined as P) };
      return { ok: true as const, value: await onMatch(trx, s, m, prepared.value) };
    });
  })().catch(async (err: unknown) => {
    if (!wrong) await giveBack();
    throw err;
  });
  if (!outcome.ok) {
    if ('replay' in outcome) await giveBack();
    throw badRequest(INVALID_CODE);
  }
  await clearTwoFactorFailures(ctx.db, reservation);
  if (ipReservation) await releaseAttempt(ctx.db, ipReservation);
  return outcome.value;
}

/** A new set of backup codes: in clear (shown once) and as stored. */
interface BackupCodeSet {
  codes: string[];
  hashes: string[];
}

/** 10 new backup codes and their hashes (argon2id, in parallel on libuv's pool). */
async function newBackupCodeSet(userId: string): Promise<BackupCodeSet> {
  const codes = newBackupCodes();
  return { codes, hashes: await Promise.all(codes.map((c) => hashBackupCode(userId, normaliseBackupCode(c)!))) };
}

/** Replaces the user's backup codes with `set`; returns them in clear (shown once). */
async function replaceBackupCodes(trx: Knex.Transaction, userId: string, set: BackupCodeSet): Promise<string[]> {
  await trx('two_factor_backup_codes').where('user_id', userId).delete();
  await trx('two_factor_backup_codes').insert(set.hashes.map((code_hash) => ({ user_id: userId, code_hash })));
  return set.codes;
}

/** Queues one of the 2FA notices (spec §6) in `trx`; users without any address get none. */
async function notify(
  ctx: ServiceContext,
  trx: Knex.Transaction,
  userId: string,
  template: TwoFactorEmailTemplate,
  platformName: string,
  by: TwoFactorActor,
): Promise<void> {
  const to = await noticeAddress(trx, userId);
  if (!to) return;
  const user = await User.query(trx).findById(userId);
  const rendered = renderTwoFactorEmail(template, emailLocale(user?.preferred_locale, by.acceptLanguage), {
    username: user?.username ?? null,
    platformName,
    at: clock.date(),
  });
  await writeNoticeEmail(trx, { to, userId, template, ...rendered });
  afterCommit(trx, () => ctx.outbox.wake());
}

const requirePending = (s: TwoFactorState) => {
  if (s.row?.enabled_at) throw badRequest('two-factor authentication is already enabled');
  if (!s.row?.setup_expires_at) throw badRequest('no pending two-factor setup: call setup first');
  if (s.row.setup_expires_at.getTime() <= clock.now()) throw badRequest('setup expired: call setup again');
};

const requireEnabled = (s: TwoFactorState) => {
  if (!isEnabled(s)) throw badRequest('two-factor authentication is not enabled');
};

/** POST 2fa/verify: a valid TOTP code of the pending setup enables 2FA; 10 backup codes, once; confirmation mail. */
export async function verifyTwoFactor(ctx: ServiceContext, userId: string, code: string, by: TwoFactorActor) {
  await liveUser(ctx.db, userId);
  return withTwoFactorCode(
    ctx,
    userId,
    code,
    by,
    'verify',
    { allowBackup: false, state: requirePending, prepare: () => newBackupCodeSet(userId) },
    async (trx, s, _m, set) => {
      const now = clock.date();
      await trx('user_two_factor')
        .where('user_id', userId)
        .update({ enabled_at: now, setup_expires_at: null, updated_at: now });
      const codes = await replaceBackupCodes(trx, userId, set);
      await recordAuditEvent(
        attributed(
          { ...by, actorId: by.actorId ?? userId },
          {
            user_id: userId,
            event_type: '2fa_enabled',
            resource_type: 'user',
            resource_id: userId,
            metadata: { platform: s.platformSlug },
          },
        ),
        trx,
      );
      await notify(ctx, trx, userId, 'two_factor_enabled', s.platformName ?? 'Service', by);
      return {
        backup_codes: codes,
        message: 'two-factor authentication is enabled; keep these backup codes safe, they are shown only once',
        platform_slug: s.platformSlug,
        success: true,
      };
    },
  );
}

/** DELETE 2fa: a TOTP or backup code turns 2FA off (secret and backup codes are deleted); alert mail. */
export async function disableTwoFactor(ctx: ServiceContext, userId: string, code: string, by: TwoFactorActor) {
  await liveUser(ctx.db, userId);
  return withTwoFactorCode(
    ctx,
    userId,
    code,
    by,
    'disable',
    { allowBackup: true, state: requireEnabled },
    async (trx, s, m) => {
      await trx('two_factor_backup_codes').where('user_id', userId).delete();
      await trx('user_two_factor').where('user_id', userId).delete();
      await recordAuditEvent(
        attributed(
          { ...by, actorId: by.actorId ?? userId },
          {
            user_id: userId,
            event_type: '2fa_disabled',
            resource_type: 'user',
            resource_id: userId,
            metadata: { platform: s.platformSlug, method: m.kind },
          },
        ),
        trx,
      );
      await notify(ctx, trx, userId, 'two_factor_disabled', s.platformName ?? 'Service', by);
      return { success: true, message: 'two-factor authentication is disabled' };
    },
  );
}

/** POST backup-codes/regenerate: TOTP only (a backup code is refused); old codes dead at once; notice mail. */
export async function regenerateBackupCodes(ctx: ServiceContext, userId: string, code: string, by: TwoFactorActor) {
  await liveUser(ctx.db, userId);
  if (!/^\d{6}$/.test(code.trim()) && normaliseBackupCode(code))
    throw badRequest('code: a backup code cannot regenerate backup codes; use a code from your authenticator app');
  return withTwoFactorCode(
    ctx,
    userId,
    code,
    by,
    'regenerate_backup_codes',
    { allowBackup: false, state: requireEnabled, prepare: () => newBackupCodeSet(userId) },
    async (trx, s, _m, set) => {
      const codes = await replaceBackupCodes(trx, userId, set);
      await recordAuditEvent(
        attributed(
          { ...by, actorId: by.actorId ?? userId },
          {
            user_id: userId,
            event_type: '2fa_backup_codes_regenerated',
            resource_type: 'user',
            resource_id: userId,
            metadata: { platform: s.platformSlug },
          },
        ),
        trx,
      );
      await notify(ctx, trx, userId, 'two_factor_backup_codes', s.platformName ?? 'Service', by);
      return {
        backup_codes: codes,
        message: 'new backup codes; the old ones no longer work',
        platform_slug: s.platformSlug,
        success: true,
      };
    },
  );
}
