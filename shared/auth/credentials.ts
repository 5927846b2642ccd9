import type { Knex } from 'knex';
import type Redis from 'ioredis';
import { LRUCache } from 'lru-cache';
import type { Config } from '../config';
import { sha256 } from '../crypto';
import { AuthInvalidation, AuthInvalidationMessage, PubSub } from '../events';
import { findActiveBan, loadApiKeyRoleAccess, loadUserAccess } from '../queries/access';
import type { Logger } from '../logger';
import { effectivePermissions, PermissionSet, Principal } from '../policies';
import { redisKey } from '../redis';
import { oauthAccessTokenSource } from './oauthTokens';

/** What a credential resolved to, cached per token hash. */
export interface CredentialEntry {
  principal: Exclude<Principal, { kind: 'anonymous' }>;
  /** Epoch ms after which the credential is dead (Infinity: never). */
  expiresAt: number;
  /** Epoch ms until which the user is banned (0: not banned, Infinity: permanently). */
  bannedUntil: number;
  /** Ids this entry depends on, for targeted invalidation. */
  userId: string | null;
  apiKeyId: string | null;
}

export type CredentialResult =
  | { ok: true; principal: Exclude<Principal, { kind: 'anonymous' }>; entry: CredentialEntry }
  | { ok: false; status: 401 | 403; message: string };

/** A kind of Bearer credential: session token, API key, OAuth access token… */
export interface CredentialSource {
  name: string;
  /** Cheap test on the raw token (its prefix) to pick the source without a query. */
  matches(token: string): boolean;
  /** Loads the entry for a token hash, or null when unknown / revoked / inactive. */
  load(db: Knex, tokenHash: string): Promise<CredentialEntry | null>;
}

const SESSION_PREFIX = 'sess_';

async function userEntry(
  db: Knex,
  userId: string,
  base: { sessionId: string | null; via: 'session' | 'oauth'; oauthClientId?: string; oauthTokenId?: string; scopes?: string[] | null; expiresAt: number },
): Promise<CredentialEntry> {
  const [access, ban] = await Promise.all([loadUserAccess(db, userId), findActiveBan(db, userId)]);
  const grant = base.scopes ? new PermissionSet(base.scopes) : 'all';
  return {
    principal: {
      kind: 'user',
      userId,
      sessionId: base.sessionId,
      via: base.via,
      ...(base.oauthClientId ? { oauthClientId: base.oauthClientId } : {}),
      ...(base.oauthTokenId ? { oauthTokenId: base.oauthTokenId } : {}),
      permissions: effectivePermissions(new PermissionSet(access.permissions), grant),
      grant,
      roleIds: access.roleIds,
    },
    expiresAt: base.expiresAt,
    bannedUntil: ban ? (ban.expires_at ? ban.expires_at.getTime() : Infinity) : 0,
    userId,
    apiKeyId: null,
  };
}

/** Session tokens issued by POST /v1/sessions (and the login flows). */
export const sessionSource: CredentialSource = {
  name: 'session',
  matches: (t) => t.startsWith(SESSION_PREFIX),
  async load(db, hash) {
    const row = await db('sessions as s')
      .join('users as u', 'u.id', 's.user_id')
      .where('s.token_hash', hash)
      .whereNull('u.deleted_at')
      .first('s.id', 's.user_id', 's.expires_at');
    if (!row) return null;
    return userEntry(db, row.user_id, { sessionId: row.id, via: 'session', expiresAt: new Date(row.expires_at).getTime() });
  },
};

/** API keys (user keys and system keys). Also the fallback for tokens without a known prefix. */
export const apiKeySource: CredentialSource = {
  name: 'apiKey',
  matches: () => true,
  async load(db, hash) {
    const key = await db('api_keys as k')
      .leftJoin('users as u', 'u.id', 'k.user_id')
      .where('k.key_hash', hash)
      .where('k.is_active', true)
      .first('k.id', 'k.user_id', 'k.scopes', 'k.is_system', 'k.expires_at', 'u.deleted_at', 'u.id as owner_id');
    if (!key) return null;
    if (key.user_id && (!key.owner_id || key.deleted_at)) return null;
    const expiresAt = key.expires_at ? new Date(key.expires_at).getTime() : Infinity;
    if (key.is_system) {
      return { principal: { kind: 'system', apiKeyId: key.id, permissions: new PermissionSet(['*:*']) }, expiresAt, bannedUntil: 0, userId: null, apiKeyId: key.id };
    }
    const [roleAccess, owner, ban] = await Promise.all([
      loadApiKeyRoleAccess(db, key.id),
      key.user_id ? loadUserAccess(db, key.user_id) : Promise.resolve({ permissions: [] as string[], roleIds: [] as string[] }),
      key.user_id ? findActiveBan(db, key.user_id) : Promise.resolve(undefined),
    ]);
    // The key's roles widen its grant, never its owner: a demoted owner's key loses what the role gave.
    // An ownerless key (service key made by an operator) is bounded by its roles alone.
    const grant = new PermissionSet([...(key.scopes as string[]), ...roleAccess.permissions]);
    const bound = key.user_id ? owner.permissions : roleAccess.permissions;
    return {
      principal: {
        kind: 'apiKey',
        apiKeyId: key.id,
        userId: key.user_id,
        permissions: effectivePermissions(new PermissionSet(bound), grant),
        grant,
        roleIds: owner.roleIds,
        keyRoleIds: roleAccess.roleIds,
      },
      expiresAt,
      bannedUntil: ban ? (ban.expires_at ? ban.expires_at.getTime() : Infinity) : 0,
      userId: key.user_id,
      apiKeyId: key.id,
    };
  },
};

export { userEntry as buildUserCredentialEntry };

/**
 * Resolves Bearer tokens to principals for the api and realtime processes. Resolved credentials are
 * cached in-process (hot path: no query per request); any change that affects them publishes an
 * invalidation on Redis, which every instance applies within milliseconds.
 */
export class CredentialResolver {
  private readonly cache = new LRUCache<string, CredentialEntry>({ max: 50_000, ttl: 60_000 });
  private readonly sources: CredentialSource[];
  private readonly lastUsedKeys = new Map<string, Date>();
  private readonly lastActiveSessions = new Map<string, Date>();
  private flushTimer?: NodeJS.Timeout;
  private subscriber?: Redis;
  /** Bumped by every invalidation: a load that raced with one is used once but never cached. */
  private generation = 0;
  /**
   * True while the invalidation subscription is live. Without it an invalidation could be missed,
   * so nothing is cached (every request reads the database) until the subscription is back.
   */
  private listening = false;

  constructor(
    private readonly db: Knex,
    private readonly logger: Logger,
    extraSources: CredentialSource[] = [],
  ) {
    // Prefixed sources first; the API-key source also takes tokens of unknown shape (SYSTEM_API_KEY).
    this.sources = [sessionSource, oauthAccessTokenSource, ...extraSources, apiKeySource];
  }

  /** Resolves a raw Bearer token. */
  async resolve(token: string): Promise<CredentialResult> {
    const hash = sha256(token);
    let entry = this.cache.get(hash);
    if (!entry) {
      const generation = this.generation;
      const source = this.sources.find((s) => s.matches(token))!;
      entry = (await source.load(this.db, hash)) ?? undefined;
      if (!entry) return { ok: false, status: 401, message: 'invalid or revoked credentials' };
      // The load may have read rows an invalidation has since superseded; caching it would serve
      // a stale permission set until the TTL.
      if (generation === this.generation && this.listening) this.cache.set(hash, entry);
    }
    const now = Date.now();
    if (entry.expiresAt <= now) {
      this.cache.delete(hash);
      return { ok: false, status: 401, message: 'credentials expired' };
    }
    if (entry.bannedUntil > now) return { ok: false, status: 403, message: 'account is banned' };
    this.noteUse(entry, now);
    return { ok: true, principal: entry.principal, entry };
  }

  private noteUse(entry: CredentialEntry, now: number): void {
    const p = entry.principal;
    if (p.kind === 'apiKey' || p.kind === 'system') this.lastUsedKeys.set(p.apiKeyId, new Date(now));
    else if (p.kind === 'user' && p.sessionId) this.lastActiveSessions.set(p.sessionId, new Date(now));
  }

  /** Drops cached entries matching the invalidation (all of them for `all`). */
  invalidate(msg: AuthInvalidation): void {
    this.generation++;
    if (msg.all) {
      this.cache.clear();
      return;
    }
    for (const [hash, e] of this.cache.entries()) {
      if ((msg.userId && e.userId === msg.userId) || (msg.apiKeyId && e.apiKeyId === msg.apiKeyId)) this.cache.delete(hash);
    }
  }

  private readonly afterInvalidation: Array<(msg: AuthInvalidation) => void> = [];

  /** Runs `fn` after each invalidation from Redis is applied, before it is acknowledged (realtime re-checks sockets). */
  onInvalidation(fn: (msg: AuthInvalidation) => void): void {
    this.afterInvalidation.push(fn);
  }

  /**
   * Subscribes to invalidations and starts the periodic last-used flush. Each invalidation is
   * acknowledged on `publisher` once applied, so the change that published it can answer knowing no
   * instance honours the old access any more (EventBus.invalidateAuth).
   */
  async start(subscriber: Redis, config: Pick<Config, 'redisPrefix'>, opts: { publisher: Redis; flushEveryMs?: number }): Promise<void> {
    const flushEveryMs = opts.flushEveryMs ?? 15_000;
    this.subscriber = subscriber;
    const channel = redisKey(config, PubSub.authInvalidate);
    subscriber.on('message', (ch, raw) => {
      if (ch !== channel) return;
      let msg: AuthInvalidationMessage;
      try {
        msg = JSON.parse(raw) as AuthInvalidationMessage;
      } catch (err) {
        this.logger.warn({ err }, 'bad auth invalidation message');
        return;
      }
      this.invalidate(msg);
      for (const fn of this.afterInvalidation) {
        try {
          fn(msg);
        } catch (err) {
          this.logger.warn({ err: (err as Error).message }, 'invalidation listener failed');
        }
      }
      if (msg.ackId && msg.ackTo) opts.publisher.publish(msg.ackTo, msg.ackId).catch((err: Error) => this.logger.warn({ err: err.message }, 'could not acknowledge an invalidation'));
    });
    // Invalidations published while the connection was down are lost: drop the cache on both edges.
    subscriber.on('close', () => {
      this.listening = false;
      this.cache.clear();
    });
    let subscribedOnce = false;
    subscriber.on('ready', () => {
      // After a reconnect ioredis re-subscribes in the same tick, ahead of any other traffic.
      this.cache.clear();
      this.listening = subscribedOnce;
    });
    // Waits at most a second: with Redis down the process still serves (fail-open, uncached), and
    // ioredis completes the subscription once Redis is back.
    const subscribed = subscriber.subscribe(channel).then(
      () => {
        subscribedOnce = true;
        this.listening = true;
      },
      (err) => this.logger.warn({ err: err.message }, 'auth invalidation subscribe failed'),
    );
    await Promise.race([subscribed, new Promise((r) => setTimeout(r, 1000).unref())]);
    this.flushTimer = setInterval(() => void this.flushUsage(), flushEveryMs);
    this.flushTimer.unref();
  }

  /**
   * Writes the batched last_used_at / last_activity_at stamps in two statements, so recording use
   * costs no write per request.
   */
  async flushUsage(): Promise<void> {
    const keys = [...this.lastUsedKeys.entries()];
    const sessions = [...this.lastActiveSessions.entries()];
    this.lastUsedKeys.clear();
    this.lastActiveSessions.clear();
    try {
      if (keys.length) {
        await this.db.raw(
          `UPDATE api_keys SET last_used_at = v.t FROM (SELECT unnest(?::uuid[]) AS id, unnest(?::timestamptz[]) AS t) v WHERE api_keys.id = v.id`,
          [keys.map((k) => k[0]), keys.map((k) => k[1].toISOString())],
        );
      }
      if (sessions.length) {
        await this.db.raw(
          `UPDATE sessions SET last_activity_at = v.t FROM (SELECT unnest(?::uuid[]) AS id, unnest(?::timestamptz[]) AS t) v WHERE sessions.id = v.id`,
          [sessions.map((k) => k[0]), sessions.map((k) => k[1].toISOString())],
        );
      }
    } catch (err) {
      this.logger.warn({ err }, 'could not record credential usage');
    }
  }

  async stop(): Promise<void> {
    if (this.flushTimer) clearInterval(this.flushTimer);
    await this.flushUsage();
    this.subscriber?.disconnect();
  }
}

export { SESSION_PREFIX };
