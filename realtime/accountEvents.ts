import { databaseFailureReason, isDatabaseUnavailable } from '../shared/errors';
import { AuthInvalidation, CHAT_BOTS_WS_CHANNEL } from '../shared/events';
import type { Logger } from '../shared/logger';
import { encodeEnvelope } from '../shared/proto';
import { AuthDeps, reresolve } from './auth';
import { mayRetain } from './access';
import { CloseCode } from './frames';
import type { Client, Hub } from './hub';

/** How long a socket with a dead credential waits for the account event explaining it. */
const REVOKE_GRACE_MS = 500;

/** Push types that change what a live connection may do. */
export const ACCOUNT_EVENT_TYPES: ReadonlySet<string> = new Set([
  'accountDeleted',
  'accountBanned',
  'sessionRevoked',
  'forceLogout',
  'oauthConsentRevoked',
  'permissionsUpdated',
  'rolesUpdated',
  'rolePermissionsChanged',
]);

/**
 * Effects of account events on live sockets (spec §6, issue "account events"): after the push was
 * delivered, accountDeleted / accountBanned / forceLogout close the user's sockets (and those of
 * API keys the user owns for deletion and bans), sessionRevoked closes only that session's
 * sockets, oauthConsentRevoked those opened with that client's token; permission and role changes
 * re-resolve the principal of each affected socket and drop channels it may no longer read.
 */
export class AccountEvents {
  constructor(
    private readonly hub: Hub,
    private readonly deps: AuthDeps,
    private readonly logger: Logger,
  ) {}

  /** Applies the effect of one delivered push. */
  handle(type: string, payload: Buffer): void {
    let msg: Record<string, any>;
    try {
      msg = JSON.parse(payload.toString('utf8'));
    } catch {
      return;
    }
    const userId = typeof msg.userId === 'string' ? msg.userId : null;
    const sockets = userId ? [...(this.hub.byUser.get(userId) ?? [])] : [];
    const users = sockets.filter((c) => c.principal.kind === 'user');
    switch (type) {
      case 'accountDeleted':
        for (const c of sockets) this.hub.close(c, CloseCode.accountDeleted, 'account deleted');
        break;
      case 'accountBanned':
        for (const c of sockets) this.hub.close(c, CloseCode.accountBanned, 'account banned');
        break;
      case 'forceLogout':
        for (const c of users) this.hub.close(c, CloseCode.forceLogout, 'logged out everywhere');
        break;
      case 'sessionRevoked':
        for (const c of users) {
          if (msg.sessionId && c.principal.kind === 'user' && c.principal.sessionId === msg.sessionId)
            this.hub.close(c, CloseCode.sessionRevoked, 'session revoked');
        }
        break;
      case 'oauthConsentRevoked':
        for (const c of users) {
          if (
            c.principal.kind === 'user' &&
            c.principal.via === 'oauth' &&
            c.principal.oauthClientId === msg.clientId
          ) {
            this.hub.close(c, CloseCode.oauthConsentRevoked, 'OAuth consent revoked');
          }
        }
        break;
      case 'permissionsUpdated':
      case 'rolesUpdated':
        if (userId) {
          // The push may overtake the auth invalidation (another Redis connection): drop the cache here.
          this.deps.credentials.invalidate({ userIds: [userId] });
          for (const c of sockets) this.recheck(c);
        }
        break;
      case 'rolePermissionsChanged': {
        const roleId = typeof msg.roleId === 'string' ? msg.roleId : null;
        if (!roleId) break;
        // One change to a role sends this to every holder: a role held by 20,000 users is 20,000
        // messages. Acting on each (dropping every cached credential, scanning every socket) held
        // the event loop for seconds; the roles named during one turn are handled once, after it.
        this.changedRoles.add(roleId);
        this.roleChangesDue ??= setImmediate(() => this.applyRoleChanges());
        break;
      }
    }
  }

  /** Roles whose permissions changed since the last pass (rolePermissionsChanged, coalesced per turn). */
  private readonly changedRoles = new Set<string>();
  private roleChangesDue?: NodeJS.Immediate;

  /** Drops the cached credentials once and re-checks every socket holding one of the changed roles. */
  private applyRoleChanges(): void {
    this.roleChangesDue = undefined;
    const roles = [...this.changedRoles];
    this.changedRoles.clear();
    this.deps.credentials.invalidate({ all: true });
    for (const c of this.hub.clients) {
      const p = c.principal;
      if (
        (p.kind === 'user' || p.kind === 'apiKey') &&
        roles.some((roleId) => p.roleIds.includes(roleId) || (p.kind === 'apiKey' && p.keyRoleIds.includes(roleId)))
      )
        this.recheck(c);
    }
  }

  /**
   * An auth invalidation (credential revoked, session deleted, roles changed…): re-check the
   * affected sockets. `{all: true}` comes with every role change; the users holding the role also
   * get permissionsUpdated / rolePermissionsChanged pushes (handled above), so here only API keys
   * holding roles are re-checked: re-resolving every socket of the instance on each role edit would
   * be a query storm at scale.
   */
  onInvalidation(msg: AuthInvalidation): void {
    const users = new Set(msg.userIds?.map((id) => id.toLowerCase()));
    const keys = new Set(msg.apiKeyIds?.map((id) => id.toLowerCase()));
    for (const c of this.hub.clients) {
      if (c.auth.kind === 'anonymous') continue;
      const p = c.principal;
      const hit =
        (msg.all && p.kind === 'apiKey' && (p.roleIds.length > 0 || p.keyRoleIds.length > 0)) ||
        ((p.kind === 'user' || p.kind === 'apiKey') && p.userId !== null && users.has(p.userId)) ||
        ((p.kind === 'apiKey' || p.kind === 'system') && keys.has(p.apiKeyId)) ||
        (keys.size > 0 && c.auth.kind === 'relay');
      if (hit) this.recheck(c);
    }
  }

  /**
   * After the invalidation channel was lost (Redis down, then back): the changes published
   * meanwhile were missed, so every authenticated socket is resolved again (one resolution per
   * credential, shared by its sockets) and those whose credential no longer holds are closed.
   */
  recheckAll(): void {
    for (const c of this.hub.clients) if (c.auth.kind !== 'anonymous') this.recheck(c);
  }

  /** One resolution per credential identity at a time, shared by all its sockets. */
  private readonly inflight = new Map<string, ReturnType<typeof reresolve>>();

  private resolveShared(c: Client): ReturnType<typeof reresolve> {
    const a = c.auth;
    const key =
      a.kind === 'bearer'
        ? `b:${a.token}`
        : a.kind === 'ticket'
          ? `t:${a.ticket.userId}:${a.ticket.sessionId}:${a.ticket.via}:${a.ticket.oauthTokenId ?? ''}`
          : a.kind === 'relay'
            ? `r:${a.systemToken}:${a.userId}`
            : 'anonymous';
    let p = this.inflight.get(key);
    if (!p) {
      p = reresolve(a, this.deps).finally(() => this.inflight.delete(key));
      this.inflight.set(key, p);
    }
    return p;
  }

  /**
   * A socket whose credential stopped authenticating: it loses every data channel at once, but the
   * close waits briefly, because the invalidation usually overtakes the account event that explains
   * it (sessionRevoked, accountBanned…), which should still be delivered on the user channel and
   * then closes the socket with its own code.
   */
  private revoke(c: Client, code: number, message: string): void {
    // From now on the socket holds no access at all: no subscribe, no request (REST answers 401 already).
    c.revoked = message;
    const own = c.principal.kind === 'user' ? `user:${c.principal.userId}` : null;
    for (const ch of [...c.channels]) if (ch !== own) this.hub.unsubscribe(c, ch);
    // Nor bot requests: they go to another bot, or fail at once, not to a socket about to close.
    if (c.chatBot) this.hub.demoteChatBot(c);
    setTimeout(() => this.hub.close(c, code, message.slice(0, 100)), REVOKE_GRACE_MS).unref();
  }

  /**
   * Re-resolves a socket's principal. A credential that no longer authenticates closes the socket;
   * otherwise channels the new principal may not read are dropped with an error message.
   * Concurrent requests for the same socket coalesce into one more run.
   */
  recheck(c: Client): void {
    if (c.closing) return;
    if (c.recheck?.running) {
      c.recheck.again = true;
      return;
    }
    c.recheck = { running: true, again: false };
    void (async () => {
      try {
        do {
          c.recheck!.again = false;
          const r = await this.resolveShared(c);
          if (c.closing) return;
          if (!r.ok) {
            this.revoke(c, r.status === 403 ? CloseCode.accountBanned : CloseCode.credentialsRevoked, r.message);
            return;
          }
          this.hub.setPrincipal(c, r.principal);
          this.watchExpiry(c, r.expiresAt);
          for (const ch of [...c.channels]) {
            if (mayRetain(r.principal, ch)) continue;
            this.hub.unsubscribe(c, ch);
            if (c.chatBot && ch === CHAT_BOTS_WS_CHANNEL) this.hub.demoteChatBot(c);
            const message = `access to channel ${ch} revoked`;
            if (c.format === 'protobuf')
              this.hub.sendBinary(c, encodeEnvelope('error', { message, code: 'subscription_revoked' }));
            else this.hub.sendJson(c, { type: 'error', message });
          }
        } while (c.recheck!.again);
      } catch (err) {
        // A database outage fails the re-check of every socket at once: folded, not a line each.
        if (isDatabaseUnavailable(err)) {
          const reason = databaseFailureReason(err);
          this.deps.dbOutages.failure('could not re-check a connection', reason, { err: reason, client: c.id });
        } else this.logger.warn({ err: (err as Error).message, client: c.id }, 'could not re-check a connection');
      } finally {
        c.recheck = undefined;
        this.hub.release(c);
      }
    })();
  }

  /**
   * Re-checks `c` when its credential expires (a session's or API key's expires_at, an OAuth
   * token's): the re-check finds it expired and closes the socket, as REST answers 401 from then on.
   */
  watchExpiry(c: Client, expiresAt: number): void {
    this.hub.expireAt(c, expiresAt, () => this.recheck(c));
  }
}
