import type { ServiceContext } from '../context';
import { decryptSecret, encryptSecret } from '../crypto';
import { conflict } from '../errors';
import { STREAM_SLUG } from '../integrations/platforms';
import {
  badGateway,
  ChannelStats,
  GrantRejected,
  streamClient,
  TokenRejected,
  TokenSet,
} from '../integrations/streamClient';
import { Integration } from '../models/Integration';

/**
 * The tokens of stream integrations (spec §4.25): sealed with SECRETS_KEY at rest (re-sealed by
 * rotate-secrets: shared/secretColumns.ts), unsealed only for the call that needs them, rotated by
 * an explicit refresh, by a platform that rejected the access token (once, then the call is
 * retried), and by the scheduled refresh before expiry.
 */

type Ctx = Pick<ServiceContext, 'db' | 'config' | 'logger'>;

/** Seals a token for the database (AES-256-GCM with SECRETS_KEY, the first key of the ring). */
export const sealToken = (ctx: Ctx, token: string) => encryptSecret(token, ctx.config.secretKeys);
/**
 * Opens a sealed token with the whole key ring: during a SECRETS_KEY rotation a token is still under
 * SECRETS_KEY_PREVIOUS until rotate-secrets reaches it. Only ever passed on to the platform.
 */
export const unsealToken = (ctx: Ctx, sealed: string) => decryptSecret(sealed, ctx.config.secretKeys);

/**
 * Whether `row` still holds the refresh token that was sealed as `sealedBefore`: the same sealed
 * value, or the same token re-sealed meanwhile under the current key by rotate-secrets.
 */
function holdsRefreshToken(ctx: Ctx, row: Integration, sealedBefore: string): boolean {
  const now = row.refresh_token_sealed;
  if (now === sealedBefore) return true;
  return now !== null && unsealToken(ctx, now) === unsealToken(ctx, sealedBefore);
}

/** The columns a token set writes. */
export function tokenColumns(ctx: Ctx, tokens: TokenSet, now: Date, previousRefresh: string | null) {
  return {
    access_token_sealed: sealToken(ctx, tokens.accessToken),
    // Twitch may answer a refresh without a new refresh token: the old one stays valid then.
    refresh_token_sealed: tokens.refreshToken ? sealToken(ctx, tokens.refreshToken) : previousRefresh,
    token_expires_at: tokens.expiresIn ? new Date(now.getTime() + tokens.expiresIn * 1000) : null,
  };
}

/**
 * Rotates the integration's tokens with its refresh token. When another refresh got there first
 * (the row's refresh token changed meanwhile), that one's tokens are used. A refresh token the
 * platform refuses deactivates the integration (the user must connect again) and answers 502.
 */
export async function refreshIntegrationTokens(ctx: Ctx, integration: Integration): Promise<Integration> {
  const client = streamClient(ctx.config);
  if (!integration.refresh_token_sealed)
    throw conflict('this integration has no refresh token; connect it again to renew its access');
  const sealedBefore = integration.refresh_token_sealed;
  let tokens: TokenSet;
  try {
    tokens = await client.refresh(unsealToken(ctx, sealedBefore));
  } catch (err) {
    if (!(err instanceof GrantRejected)) throw err;
    const current = await Integration.query(ctx.db).findById(integration.id);
    if (current && !holdsRefreshToken(ctx, current, sealedBefore)) return current;
    if (current)
      await Integration.query(ctx.db)
        .patch({ is_active: false })
        .where({ id: integration.id, refresh_token_sealed: current.refresh_token_sealed });
    ctx.logger.warn(
      { integrationId: integration.id },
      'stream platform refused the refresh token; integration deactivated',
    );
    throw badGateway('the stream platform refused to refresh the token; connect the integration again');
  }
  const now = new Date();
  // The row is changed only if it still holds the token just spent (a concurrent refresh wins). A
  // rotate-secrets that re-sealed that token meanwhile is no such change: the patch is retried
  // against the re-sealed value, so the new tokens are not lost.
  let expected = sealedBefore;
  for (;;) {
    const patched = (await Integration.query(ctx.db)
      .patch({
        ...tokenColumns(ctx, tokens, now, expected),
        ...(tokens.scopes.length ? { scopes: tokens.scopes } : {}),
        is_active: true,
        last_refreshed_at: now,
      })
      .where({ id: integration.id, refresh_token_sealed: expected })
      .returning('*')) as unknown as Integration[];
    if (patched[0]) return patched[0];
    // Zero rows: deleted meanwhile, or refreshed by someone else; the row as it is now answers.
    const row = await Integration.query(ctx.db).findById(integration.id);
    if (!row) throw badGateway('the integration was removed while its token was refreshed');
    if (row.refresh_token_sealed === expected || !holdsRefreshToken(ctx, row, sealedBefore)) return row;
    expected = row.refresh_token_sealed!;
  }
}

/**
 * Channel stats from the platform. An access token the platform rejects is refreshed once and the
 * call retried; a second rejection is a 502.
 */
export async function integrationStats(ctx: Ctx, integration: Integration): Promise<ChannelStats> {
  const client = streamClient(ctx.config);
  if (!integration.is_active) throw conflict('this integration is inactive; connect it again');
  try {
    return await client.stats(unsealToken(ctx, integration.access_token_sealed), integration.platform_user_id);
  } catch (err) {
    if (!(err instanceof TokenRejected)) throw err;
  }
  const refreshed = await refreshIntegrationTokens(ctx, integration);
  try {
    return await client.stats(unsealToken(ctx, refreshed.access_token_sealed), refreshed.platform_user_id);
  } catch (err) {
    if (err instanceof TokenRejected) throw badGateway('the stream platform rejected the refreshed token as well');
    throw err;
  }
}

/** How many integrations one scheduled run refreshes at most (the next run takes the rest). */
const REFRESH_BATCH = 200;

/**
 * Scheduled: refreshes the tokens of active integrations that expire within
 * STREAM_REFRESH_AHEAD_SECONDS, soonest first. Nothing happens while the platform is not configured.
 */
export async function refreshExpiringIntegrations(ctx: Ctx): Promise<Record<string, number>> {
  if (!ctx.config.stream) return { due: 0, refreshed: 0, failed: 0 };
  const horizon = new Date(Date.now() + ctx.config.streamRefreshAheadSeconds * 1000);
  const due = await Integration.query(ctx.db)
    .where('is_active', true)
    .whereNotNull('refresh_token_sealed')
    .where('token_expires_at', '<', horizon)
    .where('platform_slug', STREAM_SLUG)
    .orderBy('token_expires_at')
    .limit(REFRESH_BATCH);
  let refreshed = 0;
  let failed = 0;
  for (const integration of due) {
    try {
      await refreshIntegrationTokens(ctx, integration);
      refreshed++;
    } catch (err) {
      failed++;
      ctx.logger.warn(
        { integrationId: integration.id, error: (err as Error).message },
        'scheduled integration token refresh failed',
      );
    }
  }
  return { due: due.length, refreshed, failed };
}
