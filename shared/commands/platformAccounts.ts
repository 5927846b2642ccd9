import { attributed, Attribution, recordAuditEvent } from '../audit';
import type { ServiceContext } from '../context';
import { afterCommit, transaction } from '../db';
import { badRequest, conflict, notFound } from '../errors';
import { PlatformAccount } from '../models/PlatformAccount';
import { User } from '../models/User';
import { userAccounts } from '../queries/users';
import { CHAT_PLATFORM_SLUG, publishChatUserUnlinked } from './chatUserEvents';
import { deleteById } from '../models/AppModel';

/** A live user, locked for the change; 404 otherwise. */
async function lockUser(trx: Parameters<typeof User.query>[0], userId: string): Promise<User> {
  const user = await User.query(trx).findById(userId).whereNull('deleted_at').forUpdate();
  if (!user) throw notFound('user');
  return user;
}

/** Makes one of the user's linked accounts the primary one; returns it with its platform. */
export async function setPrimaryAccount(
  ctx: ServiceContext,
  userId: string,
  accountId: string,
): Promise<PlatformAccount> {
  await transaction(ctx.db, async (trx) => {
    await lockUser(trx, userId);
    const account = await PlatformAccount.query(trx).findOne({ id: accountId, user_id: userId });
    if (!account) throw notFound('platform account');
    await PlatformAccount.query(trx)
      .patch({ is_primary: false })
      .where('user_id', userId)
      .whereNot('id', account.id)
      .where('is_primary', true);
    await PlatformAccount.query(trx).patch({ is_primary: true }).where('id', account.id);
    await User.query(trx).patch({ primary_platform_account_id: account.id }).where('id', userId);
  });
  return (await PlatformAccount.query(ctx.db).findById(accountId).withGraphFetched('platform'))!;
}

/**
 * Unlinks a platform account: never the email sign-in (400), the last account or the primary one
 * (409), so the user can always still sign in.
 */
export async function unlinkAccount(
  ctx: ServiceContext,
  userId: string,
  accountId: string,
  by: Attribution,
): Promise<void> {
  await transaction(ctx.db, async (trx) => {
    const user = await lockUser(trx, userId);
    const accounts = await userAccounts(trx, userId);
    const account = accounts.find((a) => a.id === accountId);
    if (!account) throw notFound('platform account');
    if (account.platform?.slug === 'email') throw badRequest('the email sign-in account cannot be unlinked');
    if (accounts.length <= 1)
      throw conflict('cannot unlink the last platform account: the user could no longer sign in');
    if (account.id === user.primary_platform_account_id || account.is_primary) {
      throw conflict('cannot unlink the primary account: make another account primary first');
    }
    await deleteById(PlatformAccount, trx, account.id);
    if (account.platform?.slug === CHAT_PLATFORM_SLUG) {
      const unlink = { chatId: account.platform_user_id, userId };
      afterCommit(trx, () => publishChatUserUnlinked(ctx, unlink));
    }
    await recordAuditEvent(
      attributed(by, {
        user_id: userId,
        event_type: 'account_unlinked',
        resource_type: 'platform_account',
        resource_id: account.id,
        // The provider's id lets a later sign-in that re-attaches it be recorded as account_reconnected.
        metadata: { platform: account.platform?.slug ?? null, platform_user_id: account.platform_user_id },
      }),
      trx,
    );
  });
}
