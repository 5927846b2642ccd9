import type { Knex } from 'knex';
import type Redis from 'ioredis';
import { LRUCache } from 'lru-cache';
import { AccessSets } from '../caches/accessSets';
import type { Config } from '../config';
import { sha256 } from '../crypto';
import {
  AuthInvalidation,
  AuthInvalidationMessage,
  PubSub,
  SUBSCRIBER_DEAF_AFTER_MS,
  SUBSCRIBER_HEARTBEAT_MS,
} from '../events';
import type { Logger } from '../logger';
import { redisKey } from '../redis';
import { oauthAccessTokenSource } from './oauthTokens';
import { apiKeySource, CredentialEntry, CredentialResult, CredentialSource, sessionSource } from './credentialSources';

export type { CredentialEntry, CredentialResult, CredentialSource };

/** A credential by its source's name and its hash, never the token (`CredentialResolver.describe`). */
export interface StoredCredential {
  source: string;
  hash: string;
}

/**
 * Resolves Bearer tokens to principals for the api and realtime processes. Resolved credentials are
 * cached in-process (hot path: no query per request); any change that affects them publishes an
 * invalidation on Redis, which every instance applies within milliseconds.
 */
export class CredentialResolver {
  private readonly cache = new LRUCache<string, CredentialEntry>({
    max: 50_000,
    ttl: 60_000,
    // However an entry leaves (evicted, expired, replaced, deleted), it leaves the owner index too.
    dispose: (entry, hash) => this.unindex(entry, hash),
  });
  /**
   * Cached token hashes by owner (`u:` user id, `k:` API key id), so an invalidation of one user or
   * key drops their entries without visiting every entry of the cache: a fleet keeps tens of
   * thousands, and every logout, revocation or role change of one user invalidates.
   */
  private readonly hashesByOwner = new Map<string, Set<string>>();
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
  /**
   * When the subscription last answered (a PING every SUBSCRIBER_HEARTBEAT_MS, or a message). A
   * Redis that hangs keeps its connections open, so `listening` stays true while nothing arrives:
   * past SUBSCRIBER_DEAF_AFTER_MS of silence the cache is not trusted (`trusted`).
   */
  private lastHeard = 0;
  private pinging = false;
  private heartbeat?: NodeJS.Timeout;
  /**
   * Heartbeats that found the last PING still unanswered. They count only while this process's
   * event loop runs: a process too busy to read the answer for a second is not a silent Redis, and
   * must not drop its cache and make realtime re-check (and hold the pushes of) every socket.
   */
  private missedBeats = 0;
  /**
   * Heartbeats since the subscription last answered, whether or not they sent a PING. Two of them
   * mean this process's loop ran and read its sockets in between without an answer: unlike
   * `missedBeats`, which counts the beats of one PING and so reaches a second's worth later when
   * the loop runs late (a starved machine), this tells a silence seen in wall-clock time
   * (`silentEpisode`) from a single long block of this process.
   */
  private beatsSinceHeard = 0;
  /** Set once Redis has been silent for SUBSCRIBER_DEAF_AFTER_MS of heartbeats; cleared when it answers. */
  private deaf = false;
  /**
   * What users and roles hold, cached under the same rules as the credentials: the same
   * invalidations drop it, and nothing is cached while the subscription is down.
   */
  readonly access: AccessSets;
  /**
   * Loads in flight by token hash: concurrent first requests with one token share one load (a
   * tracker fleet reconnecting sends many at once). Cleared by every invalidation, so a request
   * arriving after one never joins a load that started before it.
   */
  private readonly inflight = new Map<string, Promise<CredentialEntry | null>>();

  constructor(
    private readonly db: Knex,
    private readonly logger: Logger,
    extraSources: CredentialSource[] = [],
  ) {
    // Prefixed sources first; the API-key source also takes tokens of unknown shape (SYSTEM_API_KEY).
    this.sources = [sessionSource, oauthAccessTokenSource, ...extraSources, apiKeySource];
    this.access = new AccessSets(db, () => this.trusted());
  }

  /**
   * Whether cached credentials may be used and loads cached: the subscription stands and has
   * answered lately. Otherwise every request reads the database, as with no Redis at all.
   */
  private trusted(): boolean {
    return this.listening && Date.now() - this.lastHeard < SUBSCRIBER_DEAF_AFTER_MS;
  }

  /**
   * A mark of what the cache knows now: the same mark later means no invalidation arrived between,
   * so a credential resolved at the first is still what it was (`unchangedSince`). -1 while the cache is
   * not trusted (an invalidation could be missed): nothing can be concluded then.
   */
  changeMark(): number {
    return this.trusted() ? this.generation : -1;
  }

  /**
   * Whether a credential resolved when `changeMark()` gave `mark` needs no second look now: no
   * invalidation since, and the cache trusted throughout (the subscription dropping bumps the mark).
   */
  unchangedSince(mark: number): boolean {
    return mark !== -1 && mark === this.changeMark();
  }

  /** How long the invalidation subscription has not answered (Infinity before it first stood). */
  silentForMs(): number {
    return this.lastHeard === 0 ? Infinity : Date.now() - this.lastHeard;
  }

  /**
   * The subscription answered. After a silence that made the cache untrusted, whatever was cached
   * before it is suspect (an invalidation may arrive just after this answer): it is dropped, and
   * what depends on credentials is checked again (realtime re-checks its sockets).
   */
  private heard(): void {
    // A silence the heartbeats did not count out (they ran late) still makes what was cached suspect.
    this.noteSilence();
    this.lastHeard = Date.now();
    this.missedBeats = 0;
    this.beatsSinceHeard = 0;
    if (!this.deaf) return;
    this.deaf = false;
    this.logger.info('redis answers the invalidation subscription again: cached credentials dropped');
    this.generation++;
    this.inflight.clear();
    this.cache.clear();
    this.access.clear();
    this.runResubscribed();
  }

  /**
   * Whether the subscription has been silent for SUBSCRIBER_DEAF_AFTER_MS of wall-clock time while
   * this process ran (at least two heartbeats since it last answered). A narrowing change that
   * heard no acknowledgement answers once that much time has passed (invalidateCredentials): on a
   * machine so busy that the heartbeats ran late, `missedBeats` may not have counted the silence
   * out by then, and the first push or answer after Redis is back would otherwise be taken at the
   * old cache's word.
   */
  private silentEpisode(): boolean {
    return this.listening && this.beatsSinceHeard >= 2 && Date.now() - this.lastHeard >= SUBSCRIBER_DEAF_AFTER_MS;
  }

  /**
   * Turns deaf now if the subscription has been silent long enough (`silentEpisode`) and the
   * heartbeats have not said so yet: realtime calls it before it delivers a push that arrives on
   * another connection, so the push waits for the re-check that the subscription's next answer
   * starts. Cheap: a few comparisons.
   */
  noteSilence(): void {
    if (!this.deaf && this.silentEpisode()) this.becameDeaf();
  }

  /** Redis stopped answering (or the subscription closed): realtime holds its sockets' pushes. */
  private becameDeaf(): void {
    if (this.deaf) return;
    this.deaf = true;
    for (const fn of this.afterDeaf) {
      try {
        fn();
      } catch (err) {
        this.logger.warn({ err: (err as Error).message }, 'deafness listener failed');
      }
    }
  }

  private readonly afterDeaf: Array<() => void> = [];

  /**
   * Runs `fn` when the invalidation subscription stops hearing Redis (a heartbeat unanswered for
   * SUBSCRIBER_DEAF_AFTER_MS while this process runs, or the connection lost). `onResubscribed`
   * follows when it hears again.
   */
  onDeaf(fn: () => void): void {
    this.afterDeaf.push(fn);
  }

  /** One PING on the subscription at a time; its answer is `heard`. */
  private beat(subscriber: Redis): void {
    this.beatsSinceHeard++;
    if (this.pinging) {
      if (++this.missedBeats * SUBSCRIBER_HEARTBEAT_MS >= SUBSCRIBER_DEAF_AFTER_MS) this.becameDeaf();
      return;
    }
    if (subscriber.status !== 'ready') return;
    this.pinging = true;
    subscriber.ping().then(
      () => {
        this.pinging = false;
        this.heard();
      },
      () => (this.pinging = false),
    );
  }

  /**
   * Resolves a raw Bearer token: synchronously when its entry is cached (the hot path makes no
   * promise), otherwise once the entry is loaded.
   */
  resolve(token: string): CredentialResult | Promise<CredentialResult> {
    return this.resolveHashed(
      sha256(token),
      this.sources.find((s) => s.matches(token))!,
    );
  }

  /**
   * How a credential is named without keeping it: its source and hash (what a pending connect
   * remembers, to ask `resolveStored` later whether that credential still holds).
   */
  describe(token: string): StoredCredential {
    return { source: this.sources.find((s) => s.matches(token))!.name, hash: sha256(token) };
  }

  /** Resolves a credential named by `describe`, as `resolve` would resolve its token now. */
  resolveStored(credential: StoredCredential): CredentialResult | Promise<CredentialResult> {
    const source = this.sources.find((s) => s.name === credential.source);
    if (!source) return { ok: false, status: 401, message: 'invalid or revoked credentials' };
    return this.resolveHashed(credential.hash, source);
  }

  private resolveHashed(hash: string, source: CredentialSource): CredentialResult | Promise<CredentialResult> {
    const entry = this.cache.get(hash);
    if (entry && this.trusted()) return this.check(entry, hash);
    return (this.inflight.get(hash) ?? this.load(source, hash)).then((loaded) =>
      loaded ? this.check(loaded, hash) : { ok: false, status: 401, message: 'invalid or revoked credentials' },
    );
  }

  /** What a resolved entry allows now: expired, banned, or the principal (noting the use). */
  private check(entry: CredentialEntry, hash: string): CredentialResult {
    const now = Date.now();
    if (entry.expiresAt <= now) {
      this.cache.delete(hash);
      return { ok: false, status: 401, message: 'credentials expired' };
    }
    if (entry.bannedUntil > now) return { ok: false, status: 403, message: 'account is banned' };
    this.noteUse(entry, now);
    return { ok: true, principal: entry.principal, entry };
  }

  /** Loads a token's entry once for all concurrent callers, caching it unless an invalidation raced with it. */
  private load(source: CredentialSource, hash: string): Promise<CredentialEntry | null> {
    const generation = this.generation;
    const pending = source.load(this.db, hash, this.access).then(
      (entry) => {
        if (this.inflight.get(hash) === pending) this.inflight.delete(hash);
        // The load may have read rows an invalidation has since superseded; caching it would serve
        // a stale permission set until the TTL.
        if (entry && generation === this.generation && this.trusted()) {
          this.cache.set(hash, entry);
          this.index(entry, hash);
        }
        return entry;
      },
      (err: unknown) => {
        if (this.inflight.get(hash) === pending) this.inflight.delete(hash);
        throw err;
      },
    );
    this.inflight.set(hash, pending);
    return pending;
  }

  private noteUse(entry: CredentialEntry, now: number): void {
    const p = entry.principal;
    if (p.kind === 'apiKey' || p.kind === 'system') this.lastUsedKeys.set(p.apiKeyId, new Date(now));
    else if (p.kind === 'user' && p.sessionId) this.lastActiveSessions.set(p.sessionId, new Date(now));
  }

  /** Drops cached entries matching the invalidation (all of them for `all`), access sets included. */
  invalidate(msg: AuthInvalidation): void {
    this.generation++;
    this.inflight.clear();
    this.access.invalidate(msg);
    if (msg.all) {
      // lru-cache's clear() walks its whole preallocated storage (50,000 slots) even when empty.
      if (this.cache.size) this.cache.clear();
      return;
    }
    const drop = (owner: string) => {
      const hashes = this.hashesByOwner.get(owner);
      // A copy: each delete takes its hash out of the set (dispose → unindex).
      if (hashes) for (const hash of [...hashes]) this.cache.delete(hash);
    };
    // Ids as the database writes them (lower case), whatever case the change was asked in.
    for (const id of msg.userIds ?? []) drop(`u:${id.toLowerCase()}`);
    for (const id of msg.apiKeyIds ?? []) drop(`k:${id.toLowerCase()}`);
  }

  private static owners(entry: CredentialEntry): string[] {
    const owners: string[] = [];
    if (entry.userId) owners.push(`u:${entry.userId}`);
    if (entry.apiKeyId) owners.push(`k:${entry.apiKeyId}`);
    return owners;
  }

  private index(entry: CredentialEntry, hash: string): void {
    for (const owner of CredentialResolver.owners(entry)) {
      let hashes = this.hashesByOwner.get(owner);
      if (!hashes) this.hashesByOwner.set(owner, (hashes = new Set()));
      hashes.add(hash);
    }
  }

  private unindex(entry: CredentialEntry, hash: string): void {
    for (const owner of CredentialResolver.owners(entry)) {
      const hashes = this.hashesByOwner.get(owner);
      if (hashes?.delete(hash) && hashes.size === 0) this.hashesByOwner.delete(owner);
    }
  }

  /** How many entries are cached, and under how many owners (a test's check that the index follows the cache). */
  cacheStats(): { entries: number; owners: number; indexed: number } {
    let indexed = 0;
    for (const hashes of this.hashesByOwner.values()) indexed += hashes.size;
    return { entries: this.cache.size, owners: this.hashesByOwner.size, indexed };
  }

  private readonly afterInvalidation: Array<(msg: AuthInvalidation) => void> = [];

  /** Runs `fn` after each invalidation from Redis is applied, before it is acknowledged (realtime re-checks sockets). */
  onInvalidation(fn: (msg: AuthInvalidation) => void): void {
    this.afterInvalidation.push(fn);
  }

  private readonly afterResubscribe: Array<() => void> = [];

  /**
   * Runs `fn` when the invalidation subscription stands again after a lost connection, or answers
   * again after a silence (a hung Redis): whatever was published meanwhile may have been missed, so
   * everything derived from credentials is suspect (realtime re-checks every open socket).
   */
  onResubscribed(fn: () => void): void {
    this.afterResubscribe.push(fn);
  }

  private runResubscribed(): void {
    for (const fn of this.afterResubscribe) {
      try {
        fn();
      } catch (err) {
        this.logger.warn({ err: (err as Error).message }, 'resubscribe listener failed');
      }
    }
  }

  /**
   * Subscribes to invalidations and starts the periodic last-used flush. Each invalidation is
   * acknowledged on `publisher` once applied, so the change that published it can answer knowing no
   * instance honours the old access any more (EventBus.invalidateAuth).
   */
  async start(
    subscriber: Redis,
    config: Pick<Config, 'redisPrefix'>,
    opts: { publisher: Redis; flushEveryMs?: number },
  ): Promise<void> {
    const flushEveryMs = opts.flushEveryMs ?? 15_000;
    this.subscriber = subscriber;
    const channel = redisKey(config, PubSub.authInvalidate);
    subscriber.on('message', (ch, raw) => {
      this.heard();
      if (ch !== channel) return;
      let msg: AuthInvalidationMessage;
      try {
        msg = JSON.parse(raw) as AuthInvalidationMessage;
      } catch (err) {
        this.logger.warn({ err }, 'bad auth invalidation message');
        return;
      }
      // An instance of the previous version (during a rolling reload) names one id per message.
      const legacy = msg as { userId?: unknown; apiKeyId?: unknown };
      if (typeof legacy.userId === 'string') msg.userIds = [...(msg.userIds ?? []), legacy.userId];
      if (typeof legacy.apiKeyId === 'string') msg.apiKeyIds = [...(msg.apiKeyIds ?? []), legacy.apiKeyId];
      this.invalidate(msg);
      for (const fn of this.afterInvalidation) {
        try {
          fn(msg);
        } catch (err) {
          this.logger.warn({ err: (err as Error).message }, 'invalidation listener failed');
        }
      }
      if (msg.ackId && msg.ackTo)
        opts.publisher
          .publish(msg.ackTo, msg.ackId)
          .catch((err: Error) => this.logger.warn({ err: err.message }, 'could not acknowledge an invalidation'));
    });
    // Invalidations published while the connection was down are lost: drop the cache on both edges.
    subscriber.on('close', () => {
      this.generation++;
      this.listening = false;
      this.cache.clear();
      this.access.clear();
      this.becameDeaf();
    });
    let subscribedOnce = false;
    subscriber.on('ready', () => {
      // After a reconnect ioredis re-subscribes in the same tick, ahead of any other traffic.
      this.generation++;
      this.cache.clear();
      this.access.clear();
      this.listening = subscribedOnce;
      this.lastHeard = Date.now();
      this.missedBeats = 0;
      this.beatsSinceHeard = 0;
      this.pinging = false;
      // Before the first subscription stands, its completion below ends the deafness.
      if (!subscribedOnce) return;
      this.deaf = false;
      this.runResubscribed();
    });
    // Waits at most a second: with Redis down the process still serves (fail-open, uncached), and
    // ioredis completes the subscription once Redis is back.
    const subscribed = subscriber.subscribe(channel).then(
      () => {
        subscribedOnce = true;
        this.listening = true;
        // Subscribed late (Redis was down at start): what was held while deaf is re-checked now.
        this.heard();
      },
      (err) => this.logger.warn({ err: err.message }, 'auth invalidation subscribe failed'),
    );
    await Promise.race([subscribed, new Promise((r) => setTimeout(r, 1000).unref())]);
    this.flushTimer = setInterval(() => void this.flushUsage(), flushEveryMs);
    this.flushTimer.unref();
    this.heartbeat = setInterval(() => this.beat(subscriber), SUBSCRIBER_HEARTBEAT_MS);
    this.heartbeat.unref();
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
    if (this.heartbeat) clearInterval(this.heartbeat);
    await this.flushUsage();
    this.subscriber?.disconnect();
  }
}
