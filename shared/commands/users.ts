import { randomBytes } from 'node:crypto';
import type { Knex } from 'knex';
import { attributed, Attribution, recordAuditEvent } from '../audit';
import type { ServiceContext } from '../context';
import { transaction } from '../db';
import { normaliseEmail } from '../domain/accounts';
import { badRequest, conflict, notFound } from '../errors';
import { PlatformAccount } from '../models/PlatformAccount';
import { User } from '../models/User';
import { DEFAULT_USER_ROLE_ID } from '../permissions';
import { displayAccount } from '../presenters/user';
import { supportedLocales } from '../queries/accountSettings';
import {
  emailInUse,
  emailPlatform,
  emailSignInExists,
  findUserIdByEmail,
  lockEmailAddress,
  userAccounts,
  usernameTaken,
} from '../queries/users';
import { insertRow, patchFound } from '../models/AppModel';

// Kept for importers outside the accounts area (shared/commands/oauthSignin.ts, api/routes/platforms.ts,
// api/routes/bans.ts, scripts/cli.ts); new code imports from shared/queries/users and shared/domain/accounts.

/**
 * A free username derived from a display name or email local part: invalid characters become
 * underscores, and a short random suffix is added while the name is taken.
 */
/**
 * Inside a transaction, serialises until it ends the creations that check `name` is free and then
 * take it: two first sign-ins of different people with one name at once got a unique violation
 * (409 'username: already exists') instead of the second one getting a suffixed name. Key space 3
 * of the two-key advisory locks (see lockEmailAddress), taken after the address lock.
 */
async function lockUsername(db: Knex, name: string): Promise<void> {
  if ((db as Knex.Transaction).isTransaction)
    await db.raw('SELECT pg_advisory_xact_lock(3, hashtext(lower(?)))', [name]);
}

export async function uniqueUsername(db: Knex, base: string): Promise<string> {
  let name = base
    // Letters with marks keep their letter (Zoë → Zoe): the marks NFKD splits off are dropped.
    .normalize('NFKD')
    .replace(/\p{M}+/gu, '')
    .replace(/[^A-Za-z0-9_]+/g, '_')
    .replace(/_+/g, '_')
    .replace(/^_|_$/g, '')
    .slice(0, 24);
  if (name.length < 3) name = `user${name ? '_' + name : ''}`.slice(0, 24);
  await lockUsername(db, name);
  if (!(await usernameTaken(db, name))) return name;
  for (let i = 0; i < 20; i++) {
    // 23 + '_' + 6 hex = 30, the longest username allowed (24 + '_' + 6 overflowed the column: a 500).
    const candidate = `${name.slice(0, 23)}_${randomBytes(3).toString('hex')}`;
    if (!(await usernameTaken(db, candidate))) return candidate;
  }
  throw new Error('could not find a free username');
}

export interface NewAccount {
  platformId: string;
  platformUserId: string;
  isOauth: boolean;
  username?: string | null;
  email?: string | null;
  avatarUrl?: string | null;
  passwordHash?: string | null;
  emailVerifiedAt?: Date | null;
}

/**
 * Creates a user with their first platform account (primary) and the User role: every new user,
 * whichever way they signed up, gets role_user.
 */
export async function createUserWithAccount(
  trx: Knex.Transaction,
  input: { username: string; preferredLocale?: string | null; lastLoginAt?: Date | null; account: NewAccount },
): Promise<{ user: User; account: PlatformAccount }> {
  const user = await insertRow(User, trx, {
    username: input.username,
    preferred_locale: input.preferredLocale ?? null,
    last_login_at: input.lastLoginAt ?? null,
  });
  const account = await addPlatformAccount(trx, user.id, input.account, true);
  await User.query(trx).patch({ primary_platform_account_id: account.id }).where('id', user.id);
  await trx('user_roles')
    .insert({ user_id: user.id, role_id: DEFAULT_USER_ROLE_ID })
    .onConflict(['user_id', 'role_id'])
    .ignore();
  user.primary_platform_account_id = account.id;
  return { user, account };
}

/**
 * Creates a user whose email/password sign-in counts as verified, with the User role: what finishing
 * a registration does (POST /v1/auth/register/verify) and what `cli create-admin` does. 409 when the
 * address belongs to a live account; a missing or taken username falls back to one derived from
 * the address. The caller checks that email sign-in is enabled when that matters to it.
 */
export async function createVerifiedEmailUser(
  trx: Knex.Transaction,
  input: { email: string; passwordHash: string; username?: string | null; locale?: string | null },
): Promise<{ user: User; account: PlatformAccount }> {
  const email = normaliseEmail(input.email);
  await lockEmailAddress(trx, email);
  if ((await emailSignInExists(trx, email)) || (await findUserIdByEmail(trx, email, { verifiedOnly: true })))
    throw conflict('email is already in use');
  const platform = await emailPlatform(trx);
  if (input.username) await lockUsername(trx, input.username);
  const username =
    input.username && !(await usernameTaken(trx, input.username))
      ? input.username
      : await uniqueUsername(trx, input.username ?? email.split('@')[0]);
  const created = await createUserWithAccount(trx, {
    username,
    preferredLocale: input.locale ?? null,
    account: {
      platformId: platform.id,
      platformUserId: email,
      isOauth: false,
      username,
      email,
      passwordHash: input.passwordHash,
      emailVerifiedAt: new Date(),
    },
  });
  await releaseUnprovenClaims(trx, email, created.user.id, { actorId: created.user.id });
  return created;
}

/**
 * A proven claim of `email` (a finished registration, a provider's sign-in) takes the address
 * from every other live user who only typed it in (PATCH /v1/users/{id}, never verified): one
 * address belongs to one live account, and it is the one that proved it, not the one that wrote
 * it first (else anyone could keep an address's owner from registering, or make a second account
 * with it). Each such user gets a `user_updated` event naming `email`. The caller holds the
 * address's lock (lockEmailAddress); `ownerId` is the account that proved it, `by` who acted.
 */
export async function releaseUnprovenClaims(
  trx: Knex.Transaction,
  email: string,
  ownerId: string,
  by: Attribution,
): Promise<void> {
  // Provider accounts only: an email sign-in's address is its key, never merely typed in.
  const released: Array<{ user_id: string }> = await trx('platform_accounts as pa')
    .update({ email: null, updated_at: trx.fn.now() })
    .whereRaw('lower(pa.email) = ?', [normaliseEmail(email)])
    .whereNull('pa.email_verified_at')
    .whereNot('pa.user_id', ownerId)
    .whereExists(trx('users as u').whereRaw('u.id = pa.user_id').whereNull('u.deleted_at').select(trx.raw('1')))
    .whereNotExists(
      trx('platforms as p').whereRaw('p.id = pa.platform_id').where('p.slug', 'email').select(trx.raw('1')),
    )
    .returning('pa.user_id');
  for (const userId of new Set(released.map((r) => r.user_id)))
    await recordUserUpdated(trx, by, userId, { fields: ['email'], reason: 'address_proven_by_another_account' });
}

/** Adds a platform account to an existing user. */
export async function addPlatformAccount(
  trx: Knex.Transaction,
  userId: string,
  a: NewAccount,
  primary = false,
): Promise<PlatformAccount> {
  return insertRow(PlatformAccount, trx, {
    user_id: userId,
    platform_id: a.platformId,
    platform_user_id: a.platformUserId,
    is_oauth: a.isOauth,
    is_primary: primary,
    username: a.username ?? null,
    email: a.email ?? null,
    avatar_url: a.avatarUrl ?? null,
    password_hash: a.passwordHash ?? null,
    email_verified_at: a.emailVerifiedAt ?? null,
  });
}

/** The fields of PATCH /v1/users/{id}; email and avatar_url live on the primary platform account. */
export interface UserChanges {
  username?: string;
  email?: string;
  avatar_url?: string | null;
  privacy_mode?: boolean;
  avatars_enabled?: boolean;
}

/** The `user_updated` event of a change to a user's own fields (`metadata.fields`: what changed). */
function recordUserUpdated(
  trx: Knex.Transaction,
  by: Attribution,
  userId: string,
  metadata: { fields: string[] } & Record<string, unknown>,
): Promise<unknown> {
  return recordAuditEvent(
    attributed(by, {
      user_id: userId,
      event_type: 'user_updated',
      resource_type: 'user',
      resource_id: userId,
      metadata,
    }),
    trx,
  );
}

/**
 * Updates a user (409 for a taken username or address). The sign-in address of an email account
 * changes only through the email change flow; avatars_enabled=false clears every avatar URL.
 */
export async function updateUser(
  ctx: ServiceContext,
  userId: string,
  body: UserChanges,
  by: Attribution,
): Promise<User> {
  return transaction(ctx.db, async (trx) => {
    // Before the user's row, as the sign-in flows take it: two users given one address at once
    // cannot both see it free.
    if (body.email !== undefined && body.email !== null) await lockEmailAddress(trx, body.email);
    const user = await User.query(trx).findById(userId).whereNull('deleted_at').forUpdate();
    if (!user) throw notFound('user');
    const changes: Partial<User> = {};
    if (body.username !== undefined && body.username !== user.username) {
      if (await usernameTaken(trx, body.username, userId)) throw conflict('username is already taken');
      changes.username = body.username;
    }
    if (body.privacy_mode !== undefined && body.privacy_mode !== user.privacy_mode)
      changes.privacy_mode = body.privacy_mode;
    if (body.avatars_enabled !== undefined && body.avatars_enabled !== user.avatars_enabled)
      changes.avatars_enabled = body.avatars_enabled;
    const avatarsOn = changes.avatars_enabled ?? user.avatars_enabled;
    const changed = { email: false, avatar_url: false };

    if (body.email !== undefined || body.avatar_url !== undefined) {
      const primary = displayAccount(await userAccounts(trx, userId), user.primary_platform_account_id);
      if (!primary) throw badRequest('the user has no platform account to update');
      const accountChanges: Partial<PlatformAccount> = {};
      if (body.email !== undefined && body.email !== primary.email) {
        if (primary.platform?.slug === 'email') {
          throw badRequest(
            'email: the sign-in address of an email account changes through POST /v1/users/{id}/email/request-change',
          );
        }
        if (await emailInUse(trx, body.email, userId)) throw conflict('email is already in use');
        // Typed in, not proven: it never becomes a basis for linking by email until a provider confirms it.
        Object.assign(accountChanges, { email: body.email, email_verified_at: null });
        changed.email = true;
      }
      if (body.avatar_url !== undefined) {
        if (body.avatar_url !== null && !avatarsOn) throw badRequest('avatar_url: avatars are disabled for this user');
        accountChanges.avatar_url = body.avatar_url;
        changed.avatar_url = body.avatar_url !== primary.avatar_url;
      }
      if (Object.keys(accountChanges).length)
        await PlatformAccount.query(trx).patch(accountChanges).where('id', primary.id);
    }
    if (changes.avatars_enabled === false)
      await PlatformAccount.query(trx).patch({ avatar_url: null }).where('user_id', userId);
    // Always patched (even with account-only changes) so updated_at moves.
    const updated = await patchFound(User, trx, userId, changes, 'user');
    // The event names what changed: a field sent with the value it already had is no change.
    const fields = [
      ...Object.keys(changes),
      ...(changed.email ? ['email'] : []),
      ...(changed.avatar_url ? ['avatar_url'] : []),
    ];
    if (fields.length) await recordUserUpdated(trx, by, userId, { fields });
    return updated;
  });
}

/** Changes a user's username (409 when taken case-insensitively by someone else). */
export async function changeUsername(
  ctx: ServiceContext,
  userId: string,
  username: string,
  by: Attribution,
): Promise<User> {
  return transaction(ctx.db, async (trx) => {
    const current = await User.query(trx).findById(userId).whereNull('deleted_at');
    if (!current) throw notFound('user');
    if (await usernameTaken(trx, username, userId)) throw conflict('username is already taken');
    const updated = await patchFound(User, trx, userId, { username }, 'user');
    // The same name again is no change, and the log says so by saying nothing.
    if (username !== current.username)
      await recordUserUpdated(trx, by, userId, { fields: ['username'], previous_username: current.username });
    return updated;
  });
}

/**
 * Sets or clears (null) a live user's preferred locale: one of supportedLocales(), else 400. A
 * change writes `user_updated` (docs/audit.md); the locale it already had writes nothing.
 */
export async function setPreferredLocale(
  ctx: ServiceContext,
  userId: string,
  locale: string | null,
  by: Attribution,
): Promise<User> {
  if (locale !== null) {
    const allowed = (await supportedLocales(ctx.db, ctx.config)).map((l) => l.toLowerCase());
    if (!allowed.includes(locale)) throw badRequest(`locale: must be one of ${allowed.join(', ')} or null`);
  }
  return transaction(ctx.db, async (trx) => {
    const user = await User.query(trx).findById(userId).whereNull('deleted_at').forUpdate();
    if (!user) throw notFound('user');
    const updated = await patchFound(User, trx, userId, { preferred_locale: locale }, 'user');
    if (user.preferred_locale !== locale)
      await recordUserUpdated(trx, by, userId, {
        fields: ['preferred_locale'],
        previous_locale: user.preferred_locale,
      });
    return updated;
  });
}
