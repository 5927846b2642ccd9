import type { Knex } from 'knex';
import type Redis from 'ioredis';
import { buildUserCredentialEntry } from './credentialSources';
import type { Config } from '../config';
import { randomToken, sha256 } from '../crypto';
import { HttpError, serviceUnavailable } from '../errors';
import { authorizeWsTicket, Principal } from '../policies';
import { loadOAuthTokenEntry } from './oauthTokens';
import { redisKey, RedisKeys } from '../redis';

/**
 * WebSocket tickets (spec §4.26, §5.9): a browser cannot set an Authorization header on a
 * WebSocket, so it trades its Bearer credential for a short-lived, single-use ticket and opens the
 * socket with the subprotocols ['service-ticket', <ticket>]. Only the ticket's hash is stored, in
 * Redis with a TTL; consuming it is one GETDEL, so a ticket works once even across instances.
 */

const TICKET_PREFIX = 'wst_';
/** Subprotocol name announcing a ticket; the server echoes it as the accepted subprotocol. */
export const TICKET_SUBPROTOCOL = 'service-ticket';

/** The credential identity a ticket stands for (never the credential itself). */
export interface TicketData {
  userId: string;
  sessionId: string | null;
  via: 'session' | 'oauth';
  oauthClientId?: string;
  /** OAuth tokens only: the token's row, re-checked (revoked? client active?) whenever the socket is. */
  oauthTokenId?: string;
  mintedAt: number;
}

const ticketKey = (config: Pick<Config, 'redisPrefix'>, ticket: string) =>
  redisKey(config, RedisKeys.wsTicket(sha256(ticket)));

/**
 * Mints a ticket for a user credential. API-key-only and system callers have no user context and
 * get 403 (spec §7); anonymous callers 401.
 */
export async function mintWsTicket(
  redis: Redis,
  config: Pick<Config, 'redisPrefix' | 'ws'>,
  principal: Principal,
): Promise<{ ticket: string; expiresIn: number }> {
  authorizeWsTicket(principal);
  const ticket = randomToken(TICKET_PREFIX, 32);
  const data: TicketData = {
    userId: principal.userId,
    sessionId: principal.sessionId,
    via: principal.via,
    ...(principal.oauthClientId ? { oauthClientId: principal.oauthClientId } : {}),
    ...(principal.oauthTokenId ? { oauthTokenId: principal.oauthTokenId } : {}),
    mintedAt: Date.now(),
  };
  const ttl = config.ws.ticketTtlSeconds;
  try {
    await redis.set(ticketKey(config, ticket), JSON.stringify(data), 'EX', ttl);
  } catch {
    // Tickets live only in Redis: without it none can be minted (a 503, not a fault).
    throw serviceUnavailable('WebSocket tickets are unavailable while the cache is unreachable; try again shortly');
  }
  return { ticket, expiresIn: ttl };
}

/** Consumes a ticket: returns its identity once, then never again (also after expiry). */
export async function consumeWsTicket(
  redis: Redis,
  config: Pick<Config, 'redisPrefix'>,
  ticket: string,
): Promise<TicketData | null> {
  if (!ticket.startsWith(TICKET_PREFIX) || ticket.length > 200) return null;
  const raw = await redis.getdel(ticketKey(config, ticket));
  if (!raw) return null;
  try {
    return JSON.parse(raw) as TicketData;
  } catch {
    return null;
  }
}

export type UserPrincipal = Extract<Principal, { kind: 'user' }>;

/**
 * Redeems a ticket at the upgrade: consumed (once), then the credential that minted it is resolved
 * again (principalForUser) and must still be allowed to mint it (authorizeWsTicket). A ticket thus
 * outlives neither its session or OAuth token (revoked, expired, consent withdrawn) nor the token's
 * `ws:ticket`, lost when its client's allowed scopes stop naming it.
 */
export async function redeemWsTicket(
  redis: Redis,
  db: Knex,
  config: Pick<Config, 'redisPrefix'>,
  ticket: string,
): Promise<
  | { ok: true; data: TicketData; principal: UserPrincipal; expiresAt: number }
  | { ok: false; status: 401 | 403; message: string }
> {
  const data = await consumeWsTicket(redis, config, ticket);
  if (!data) return { ok: false, status: 401, message: 'invalid, expired or already used ticket' };
  const r = await principalForUser(db, data);
  if (!r.ok) return r;
  try {
    authorizeWsTicket(r.principal);
  } catch (err) {
    if (!(err instanceof HttpError)) throw err;
    return { ok: false, status: 401, message: 'the credential behind this ticket no longer grants ws:ticket' };
  }
  return { ok: true, data, principal: r.principal, expiresAt: r.expiresAt };
}

/**
 * Rebuilds the principal a ticket stands for from the database, checking that the session or OAuth
 * token behind it still lives (not revoked, client active) and the user is neither deleted nor
 * banned. Also used to re-check such a connection after any invalidation that may concern it.
 */
export async function principalForUser(
  db: Knex,
  identity: Pick<TicketData, 'userId' | 'sessionId' | 'via' | 'oauthTokenId'>,
): Promise<
  { ok: true; principal: UserPrincipal; expiresAt: number } | { ok: false; status: 401 | 403; message: string }
> {
  if (identity.via === 'oauth') {
    const entry = identity.oauthTokenId ? await loadOAuthTokenEntry(db, { id: identity.oauthTokenId }) : null;
    if (!entry || entry.userId !== identity.userId) {
      // Expiry says so, as for sessions and keys (docs/websocket.md: `credentials expired`); the
      // extra read is on this failure path only.
      const expired =
        !entry &&
        identity.oauthTokenId &&
        (await db('oauth_access_tokens')
          .where('id', identity.oauthTokenId)
          .whereNull('revoked_at')
          .where('expires_at', '<=', db.fn.now())
          .first('id'));
      return {
        ok: false,
        status: 401,
        message: expired ? 'credentials expired' : 'the OAuth token behind this connection was revoked or expired',
      };
    }
    if (entry.bannedUntil > Date.now()) return { ok: false, status: 403, message: 'account is banned' };
    return { ok: true, principal: entry.principal as UserPrincipal, expiresAt: entry.expiresAt };
  }
  let expiresAt = Infinity;
  if (identity.sessionId) {
    const row = await db('sessions as s')
      .join('users as u', 'u.id', 's.user_id')
      .where('s.id', identity.sessionId)
      .where('s.user_id', identity.userId)
      .whereNull('u.deleted_at')
      .first('s.expires_at');
    if (!row) return { ok: false, status: 401, message: 'the session behind this credential no longer exists' };
    expiresAt = new Date(row.expires_at).getTime();
    if (expiresAt <= Date.now()) return { ok: false, status: 401, message: 'credentials expired' };
  } else {
    const user = await db('users').where('id', identity.userId).whereNull('deleted_at').first('id');
    if (!user) return { ok: false, status: 401, message: 'no such user' };
  }
  const entry = await buildUserCredentialEntry(db, identity.userId, {
    sessionId: identity.sessionId,
    via: 'session',
    expiresAt,
  });
  if (entry.bannedUntil > Date.now()) return { ok: false, status: 403, message: 'account is banned' };
  return { ok: true, principal: entry.principal as UserPrincipal, expiresAt };
}
