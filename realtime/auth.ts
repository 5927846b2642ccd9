import type http from 'node:http';
import type { Knex } from 'knex';
import type Redis from 'ioredis';
import type { CredentialResolver } from '../shared/auth/credentials';
import type { Config } from '../shared/config';
import type { OutageLog } from '../shared/outageLog';
import { SOURCE_SERVICES } from '../shared/audit';
import { ANONYMOUS, can, Principal, subjects } from '../shared/policies';
import { mayBeChatBot } from './access';
import type { ConnectionAuth } from './hub';
import { principalForUser, redeemWsTicket, TICKET_SUBPROTOCOL } from '../shared/auth/wsTickets';
import { isUuid } from '../shared/zod';
import { repeatsAuthorization } from '../shared/httpEdge';

export type UpgradeAuth =
  | {
      ok: true;
      principal: Principal;
      /** When the credential stops authenticating (ms since the epoch; Infinity: never). */
      expiresAt: number;
      auth: ConnectionAuth;
      sourceService: string | null;
      chatBot: boolean;
      subprotocol: string | null;
    }
  | { ok: false; status: 400 | 401 | 403; message: string };

export interface AuthDeps {
  db: Knex;
  /** The process's database OutageLog: a failure to reach `db` is reported there, folded. */
  dbOutages: OutageLog;
  redis: Redis;
  config: Config;
  credentials: CredentialResolver;
}

/** The offered subprotocols, in order. */
function offeredProtocols(req: http.IncomingMessage): string[] {
  const raw = req.headers['sec-websocket-protocol'];
  if (!raw) return [];
  return (Array.isArray(raw) ? raw.join(',') : raw)
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
}

/**
 * Authenticates a WebSocket upgrade (spec §5.9), the first that applies:
 * 1. subprotocols ['service-ticket', <ticket>] → the ticket's user (single use);
 * 2. Authorization: Bearer → user token or API key (a system key may act for a user with ?userId=);
 * 3. nothing → anonymous.
 * The ?token= query and cookies are never read. A bad ticket or bad Bearer is refused (401), not
 * downgraded to anonymous.
 */
export async function authenticateUpgrade(req: http.IncomingMessage, deps: AuthDeps): Promise<UpgradeAuth> {
  const protocols = offeredProtocols(req);
  const ti = protocols.indexOf(TICKET_SUBPROTOCOL);
  let principal: Principal = ANONYMOUS;
  let expiresAt = Infinity;
  let auth: ConnectionAuth = { kind: 'anonymous' };
  let subprotocol: string | null = null;

  if (ti >= 0) {
    const ticket = protocols[ti + 1];
    if (!ticket) return { ok: false, status: 401, message: 'service-ticket subprotocol without a ticket' };
    const r = await redeemWsTicket(deps.redis, deps.db, deps.config, ticket);
    if (!r.ok) return r;
    principal = r.principal;
    expiresAt = r.expiresAt;
    auth = { kind: 'ticket', ticket: r.data };
    subprotocol = TICKET_SUBPROTOCOL;
  } else if (req.headers.authorization !== undefined) {
    if (repeatsAuthorization(req))
      return {
        ok: false,
        status: 401,
        message: 'malformed Authorization header: send one Authorization header, not several',
      };
    const m = /^Bearer\s+(\S+)\s*$/i.exec(req.headers.authorization);
    if (!m) return { ok: false, status: 401, message: 'malformed Authorization header: expected Bearer <token>' };
    const result = await deps.credentials.resolve(m[1]);
    if (!result.ok) return result;
    principal = result.principal;
    expiresAt = result.entry.expiresAt;
    auth = { kind: 'bearer', token: m[1] };
    const relayUsers = new URL(req.url ?? '/', 'http://x').searchParams.getAll('userId');
    // Two userId parameters name two users: which one to act for is the client's to say, not ours.
    if (relayUsers.length > 1) return { ok: false, status: 400, message: 'userId: given more than once' };
    const relayUser = relayUsers[0] ?? null;
    if (relayUser !== null && can(principal, 'actForUser', subjects.relay())) {
      if (!isUuid(relayUser)) return { ok: false, status: 400, message: 'userId: must be a UUID' };
      const r = await principalForUser(deps.db, { userId: relayUser.toLowerCase(), sessionId: null, via: 'session' });
      if (!r.ok) return r.status === 401 ? { ok: false, status: 400, message: 'userId: no such user' } : r;
      principal = r.principal;
      expiresAt = Math.min(expiresAt, r.expiresAt);
      auth = { kind: 'relay', systemToken: m[1], userId: r.principal.userId };
    }
  }

  // Service clients name themselves with X-Source-Service (as on REST). A chat bot receives chat
  // sync and moderation requests, so claiming to be one needs the system key or chat:sync.
  let sourceService: string | null = null;
  let chatBot = false;
  const declared = req.headers['x-source-service'];
  if (typeof declared === 'string' && declared && can(principal, 'declareSourceService', subjects.relay())) {
    if (!(SOURCE_SERVICES as readonly string[]).includes(declared)) {
      return { ok: false, status: 400, message: `X-Source-Service: must be one of ${SOURCE_SERVICES.join(', ')}` };
    }
    sourceService = declared;
    if (declared === 'chat_bot') {
      if (!mayBeChatBot(principal))
        return { ok: false, status: 403, message: 'a chat bot connection needs the system key or chat:sync' };
      chatBot = true;
    }
  }
  return { ok: true, principal, expiresAt, auth, sourceService, chatBot, subprotocol };
}

/**
 * Re-resolves a live connection's principal (after a permission, role, ban or credential change).
 * Returns the refusal when the credential no longer authenticates.
 */
export async function reresolve(
  auth: ConnectionAuth,
  deps: AuthDeps,
): Promise<{ ok: true; principal: Principal; expiresAt: number } | { ok: false; status: number; message: string }> {
  switch (auth.kind) {
    case 'anonymous':
      return { ok: true, principal: ANONYMOUS, expiresAt: Infinity };
    case 'bearer': {
      const r = await deps.credentials.resolve(auth.token);
      return r.ok ? { ok: true, principal: r.principal, expiresAt: r.entry.expiresAt } : r;
    }
    case 'ticket':
      return principalForUser(deps.db, auth.ticket);
    case 'relay': {
      const sys = await deps.credentials.resolve(auth.systemToken);
      if (!sys.ok) return sys;
      const r = await principalForUser(deps.db, { userId: auth.userId, sessionId: null, via: 'session' });
      return r.ok ? { ...r, expiresAt: Math.min(r.expiresAt, sys.entry.expiresAt) } : r;
    }
  }
}
