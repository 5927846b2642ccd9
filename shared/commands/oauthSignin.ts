import type { ServiceContext } from '../context';
import { badRequest, forbidden } from '../errors';
import { PlatformAccount } from '../models/PlatformAccount';
import { User } from '../models/User';
import { z, zChars, zHttpUrl } from '../zod';
import type { Knex } from 'knex';
import { attributed, Attribution, AuditInput, recordAuditEvents } from '../audit';
import { afterCommit, transaction } from '../db';
import { normaliseEmail } from '../domain/accounts';
import { twoFactorRequirement } from '../queries/twoFactor';
import { findPlatform, findUserIdByEmail, flatUser, lockEmailAddress, lockProviderAccount } from '../queries/users';
import { addPlatformAccount, createUserWithAccount, releaseUnprovenClaims, uniqueUsername } from './users';
import { CHAT_PLATFORM_SLUG, publishChatUserLinked } from './chatUserEvents';

/** Whether the user's audit log shows them unlinking this provider account before. */
async function wasUnlinkedBy(trx: Knex.Transaction, userId: string, platform: string, platformUserId: string) {
  const row = await trx('audit_events')
    .where({ user_id: userId, event_type: 'account_unlinked' })
    .whereRaw("metadata->>'platform' = ? AND metadata->>'platform_user_id' = ?", [platform, platformUserId])
    .first('id');
  return !!row;
}

/** Body of a provider sign-in (camelCase per spec §4.11), shared by REST and GraphQL. */
export const oauthSigninSchema = z.object({
  email: zChars({ max: 320 }, z.string().trim().email({ message: 'must be an email address' }))
    .nullable()
    .optional(),
  name: zChars({ trim: true, min: 1, minMessage: 'is required', max: 255 }),
  oauthProvider: zChars({ min: 1, max: 50 }),
  oauthProviderId: zChars({ min: 1, max: 255 }),
  image: zHttpUrl().nullable().optional(),
});

export interface OauthSigninInput {
  email: string | null;
  name: string;
  oauthProvider: string;
  oauthProviderId: string;
  image: string | null;
}

export interface OauthSigninResult {
  user: Awaited<ReturnType<typeof flatUser>>;
  created: boolean;
  linked: boolean;
  /**
   * The user's roles (requires_two_factor) or sign-in platforms (two_factor_required) require 2FA
   * and it is not enabled: the client sends the user to the 2FA setup.
   */
  twoFactorSetupRequired: boolean;
}

/**
 * A provider sign-in relayed by the first-party app (POST /v1/users/oauth, GraphQL oauthSignin).
 * Known provider account: its name, email and avatar are refreshed. Unknown account whose email
 * belongs to a user: the account is linked to that user. Otherwise a new user is created (with the
 * User role). Provider-supplied addresses count as verified. A disabled platform refuses new
 * sign-ins; avatars stay empty for users who turned avatars off.
 */
export async function oauthSignin(
  ctx: ServiceContext,
  input: OauthSigninInput,
  meta: Omit<Attribution, 'actorId'> = {},
): Promise<OauthSigninResult> {
  const platform = await findPlatform(ctx.db, input.oauthProvider);
  if (!platform) throw badRequest(`oauthProvider: unknown platform '${input.oauthProvider}'`);
  if (!platform.is_oauth)
    throw badRequest(`oauthProvider: '${platform.slug}' is not an OAuth provider; use email sign-in`);
  if (!platform.enabled)
    throw forbidden(`sign-in with ${platform.name} is disabled; use another linked sign-in method`);
  const email = input.email ? normaliseEmail(input.email) : null;
  // The signing-in user acts: every event is theirs, from the relayed request's address.
  /** The user's events of this sign-in, in order, with one statement. */
  const record = (trx: Knex.Transaction, userId: string, ...events: Array<Omit<AuditInput, 'user_id'>>) =>
    recordAuditEvents(
      events.map((event) => attributed({ ...meta, actorId: userId }, { user_id: userId, ...event })),
      trx,
    );
  // A chat account linked to a user (new user or matched by email): the chat bot hears of it.
  const announceLink = (trx: Knex.Transaction, userId: string, avatarUrl: string | null) => {
    if (platform.slug !== CHAT_PLATFORM_SLUG) return;
    const link = { chatId: input.oauthProviderId, userId, chatUsername: input.name, avatarUrl };
    afterCommit(trx, () => publishChatUserLinked(ctx, link));
  };
  const login = (accountId: string) => ({
    event_type: 'login',
    resource_type: 'platform_account',
    resource_id: accountId,
    metadata: { platform: platform.slug },
  });

  const result = await transaction(ctx.db, async (trx) => {
    // Concurrent first sign-ins of one provider account, or of several with one address, make one
    // user: the second one waits here and then finds the account (or the address's owner).
    await lockProviderAccount(trx, platform.id, input.oauthProviderId);
    if (email) await lockEmailAddress(trx, email);
    const existing = await PlatformAccount.query(trx).findOne({
      platform_id: platform.id,
      platform_user_id: input.oauthProviderId,
    });
    if (existing) {
      const user = await User.query(trx).findById(existing.user_id).forUpdate();
      if (!user || user.deleted_at) throw forbidden('this account has been deleted');
      await PlatformAccount.query(trx)
        .patch({
          username: input.name,
          email,
          email_verified_at: email ? new Date() : null,
          avatar_url: user.avatars_enabled ? input.image : null,
        })
        .where('id', existing.id);
      await User.query(trx).patch({ last_login_at: new Date() }).where('id', user.id);
      if (email) await releaseUnprovenClaims(trx, email, user.id, { ...meta, actorId: user.id });
      await record(trx, user.id, login(existing.id));
      return { userId: user.id, created: false, linked: false };
    }

    const ownerId = email ? await findUserIdByEmail(trx, email, { verifiedOnly: true }) : undefined;
    if (ownerId) {
      const owner = await User.query(trx).findById(ownerId).forUpdate();
      const account = await addPlatformAccount(trx, ownerId, {
        platformId: platform.id,
        platformUserId: input.oauthProviderId,
        isOauth: true,
        username: input.name,
        email,
        emailVerifiedAt: new Date(),
        avatarUrl: owner!.avatars_enabled ? input.image : null,
      });
      await User.query(trx).patch({ last_login_at: new Date() }).where('id', ownerId);
      // The same provider account this user unlinked before comes back: reconnected, not newly linked.
      const reconnected = await wasUnlinkedBy(trx, ownerId, platform.slug, input.oauthProviderId);
      await record(
        trx,
        ownerId,
        {
          ...login(account.id),
          event_type: reconnected ? 'account_reconnected' : 'account_linked',
          metadata: { platform: platform.slug, via: 'email_match' },
        },
        login(account.id),
      );
      announceLink(trx, ownerId, account.avatar_url);
      return { userId: ownerId, created: false, linked: true };
    }

    const { user, account } = await createUserWithAccount(trx, {
      username: await uniqueUsername(trx, input.name || (email ? email.split('@')[0] : 'user')),
      lastLoginAt: new Date(),
      account: {
        platformId: platform.id,
        platformUserId: input.oauthProviderId,
        isOauth: true,
        username: input.name,
        email,
        avatarUrl: input.image,
        emailVerifiedAt: email ? new Date() : null,
      },
    });
    await record(trx, user.id, {
      event_type: 'user_created',
      resource_type: 'user',
      resource_id: user.id,
      metadata: { platform: platform.slug },
    });
    await record(trx, user.id, login(account.id));
    // A user who only typed this address in loses it to the account the provider vouches for.
    if (email) await releaseUnprovenClaims(trx, email, user.id, { ...meta, actorId: user.id });
    announceLink(trx, user.id, account.avatar_url);
    return { userId: user.id, created: true, linked: false };
  });
  const requirement = await twoFactorRequirement(ctx.db, result.userId);
  return {
    user: await flatUser(ctx.db, result.userId),
    created: result.created,
    linked: result.linked,
    twoFactorSetupRequired: requirement.required && !requirement.enabled,
  };
}
