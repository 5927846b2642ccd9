import { attributed, Attribution, recordAuditEvent } from '../audit';
import type { StoredCredential } from '../auth/credentials';
import { issueConnectState, PendingConnect } from '../caches/integrationStates';
import type { ServiceContext } from '../context';
import { transaction } from '../db';
import { badRequest, notFound, serviceUnavailable } from '../errors';
import { IntegrationPlatform, platformEnabled } from '../integrations/platforms';
import { GrantRejected, streamClient, TokenRejected } from '../integrations/streamClient';
import { BotStatus, Integration } from '../models/Integration';
import { can, Principal, subjects } from '../policies';
import { tokenColumns, unsealToken } from './integrationTokens';
import { deleteById, insertRow, patchLoaded } from '../models/AppModel';

/**
 * Connecting, disconnecting and configuring stream-platform integrations (spec §4.25). The OAuth
 * dance: connect issues a single-use state and the platform's authorization URL; the platform
 * sends the browser to the service's callback, which exchanges the code, reads the platform user
 * and stores the tokens sealed.
 */

type Ctx = Pick<ServiceContext, 'db' | 'config' | 'logger' | 'redis'>;

/** The service's own callback, the redirect_uri the platform sees (decisions: `{APP_URL}/v1/integrations/callback/{platform}`). */
export function callbackUrl(ctx: Pick<ServiceContext, 'config'>, platform: string): string {
  return `${ctx.config.appUrl.replace(/\/+$/, '')}/v1/integrations/callback/${platform}`;
}

/**
 * Starts a connect: the requested scopes (unknown names → 400 naming the field) plus the required
 * ones, a fresh state bound to the user and the client's redirect_uri, and the URL to send the
 * user's browser to. 503 while the platform is not configured.
 */
export async function startConnect(
  ctx: Ctx,
  userId: string,
  platform: IntegrationPlatform,
  input: { redirectUri: string; scopes?: string[]; credential?: StoredCredential },
): Promise<{ authorization_url: string; state: string }> {
  if (!platformEnabled(ctx.config, platform))
    throw serviceUnavailable(
      `the ${platform.slug} platform is not configured on this server: its operator must set STREAM_AUTH_URL, STREAM_API_URL, STREAM_CLIENT_ID and STREAM_CLIENT_SECRET`,
    );
  const known = new Set(platform.scopes.map((s) => s.name));
  const unknown = (input.scopes ?? []).filter((s) => !known.has(s));
  if (unknown.length) throw badRequest(`scopes: unknown scope(s) ${unknown.join(', ')}`);
  const scopes = platform.scopes.filter((s) => s.required || (input.scopes ?? []).includes(s.name)).map((s) => s.name);
  const pending: PendingConnect = {
    userId,
    platform: platform.slug,
    redirectUri: input.redirectUri,
    scopes,
    credential: input.credential,
  };
  const state = await issueConnectState(ctx.redis, ctx.config, pending);
  const url = streamClient(ctx.config).authorizationUrl(state, callbackUrl(ctx, platform.slug), scopes);
  return { authorization_url: url, state };
}

/** Why a callback failed, as the `error` code the client's redirect_uri receives. */
export class ConnectFailed extends Error {
  constructor(
    readonly code: string,
    message: string,
  ) {
    super(message);
    this.name = 'ConnectFailed';
  }
}

/**
 * Completes a connect whose state was taken: code → tokens (the token must have been issued to
 * this service's client), the platform user, then the integration created, or re-activated with
 * the new tokens when the user had connected that platform account before. Failures throw
 * ConnectFailed with the code for the redirect; no integration is written then. `starter` is the
 * credential that started the connect resolved now: one revoked or narrowed since, or whose user
 * was banned or deleted since, gets `access_denied`.
 */
export async function completeConnect(
  ctx: Ctx,
  pending: PendingConnect,
  code: string,
  by: Attribution,
  starter: { ok: true; principal: Principal } | { ok: false; message: string },
): Promise<Integration> {
  const client = streamClient(ctx.config);
  const fail = (code: string, message: string) => new ConnectFailed(code, message);
  // The credential that started the connect, as it is now: revoked, narrowed, its user banned or
  // deleted since, nothing is connected (and the code is not even exchanged).
  if (!starter.ok) throw fail('access_denied', starter.message);
  if (!can(starter.principal, 'finish', subjects.integrationConnect(pending.userId)))
    throw fail('access_denied', 'the credential that started the connect may no longer connect integrations');
  let tokens, user;
  try {
    tokens = await client.exchangeCode(code, callbackUrl(ctx, pending.platform));
    const info = await client.validate(tokens.accessToken);
    if (info.clientId !== ctx.config.stream!.clientId)
      throw fail('invalid_token', 'the token was issued to another client');
    user = await client.currentUser(tokens.accessToken);
    if (info.userId && info.userId !== user.id) throw fail('invalid_token', 'the token and the user do not match');
  } catch (err) {
    if (err instanceof ConnectFailed) throw err;
    if (err instanceof GrantRejected) throw fail('invalid_grant', 'the stream platform refused the authorization code');
    if (err instanceof TokenRejected) throw fail('invalid_token', 'the stream platform rejected its own token');
    throw fail('upstream_error', (err as Error).message);
  }
  const now = new Date();
  const columns = {
    ...tokenColumns(ctx, tokens, now, null),
    username: user.login,
    display_name: user.displayName,
    profile_image_url: user.profileImageUrl,
    scopes: tokens.scopes.length ? tokens.scopes : pending.scopes,
    is_active: true,
    last_refreshed_at: now,
  };
  return transaction(ctx.db, async (trx) => {
    // Concurrent callbacks for one platform account (a double click, two tabs) take turns: the
    // first inserts, the next finds its row and reconnects with its own tokens. Without the lock
    // both found none and the loser's insert failed on the unique index (a bare 409 instead of the
    // redirect). Key space 4 (1-3: address, provider account, username).
    await trx.raw('SELECT pg_advisory_xact_lock(4, hashtext(?))', [`${pending.userId}:${pending.platform}:${user.id}`]);
    const existing = await Integration.query(trx)
      .findOne({ user_id: pending.userId, platform_slug: pending.platform, platform_user_id: user.id })
      .forUpdate();
    const row = existing
      ? await patchLoaded(existing, trx, { ...columns, connected_at: now }, 'integration')
      : await insertRow(Integration, trx, {
          user_id: pending.userId,
          platform_slug: pending.platform,
          platform_user_id: user.id,
          bot_status: 'active',
          connected_at: now,
          ...columns,
        });
    await recordAuditEvent(
      attributed(by, {
        user_id: pending.userId,
        event_type: existing ? 'account_reconnected' : 'account_linked',
        resource_type: 'integration',
        resource_id: row.id,
        metadata: { platform: pending.platform, platform_user_id: user.id, username: user.login },
      }),
      trx,
    );
    return row;
  });
}

/**
 * Disconnects: the access token is revoked at the platform first (which also ends its refresh
 * token), then the integration is deleted. A platform that fails to answer leaves the integration
 * in place (502): the user can try again. Without platform configuration only the row goes.
 */
export async function disconnectIntegration(ctx: Ctx, integration: Integration, by: Attribution): Promise<void> {
  if (ctx.config.stream) {
    await streamClient(ctx.config).revoke(unsealToken(ctx, integration.access_token_sealed));
  }
  await transaction(ctx.db, async (trx) => {
    // Of concurrent disconnects one deletes (and records the event); the others answer 404.
    if ((await deleteById(Integration, trx, integration.id)) === 0) throw notFound('integration');
    await recordAuditEvent(
      attributed(by, {
        user_id: integration.user_id,
        event_type: 'account_unlinked',
        resource_type: 'integration',
        resource_id: integration.id,
        metadata: { platform: integration.platform_slug, platform_user_id: integration.platform_user_id },
      }),
      trx,
    );
  });
}

/** Sets the stream bot's status for the integration (spec §3: any of the three states, from any). */
export async function setBotStatus(ctx: Ctx, integration: Integration, status: BotStatus): Promise<Integration> {
  return patchLoaded(integration, ctx.db, { bot_status: status }, 'integration');
}
