import type Redis from 'ioredis';
import type { Knex } from 'knex';
import type { Config } from '../config';
import { PubSub, SUBSCRIBER_DEAF_AFTER_MS, SUBSCRIBER_HEARTBEAT_MS } from '../events';
import type { Logger } from '../logger';
import { redisKey } from '../redis';
import { readConfigs, SystemConfigKey, SystemConfigValue } from '../systemConfig';

/**
 * In-process cache of system config values (shared/systemConfig.ts), one per database handle. While
 * the process listens on `PubSub.systemConfigChanged`, an entry lives until a change of its key is
 * published (`publishConfigChange`, after the PATCH commits), so a change reaches every process in
 * the time a Redis message takes and a hot path reads no database. While the subscription is down
 * (Redis unreachable, or a process that never subscribed, such as the CLI) entries are trusted for
 * UNLISTENED_MAX_AGE_MS only, so a change is still seen within a second. A Redis that hangs keeps
 * the connection open, so the subscription is also pinged (as the credential cache's is): once it
 * has not answered for SUBSCRIBER_DEAF_AFTER_MS, entries fall back to the same short lifetime.
 */
const UNLISTENED_MAX_AGE_MS = 1000;

interface Slot {
  at: number;
  value: Promise<unknown>;
}

class ConfigCache {
  readonly entries = new Map<string, Slot>();
  /** Values derived from several keys (cachedView), kept while their slots are the same objects. */
  readonly views = new Map<string, { slots: Slot[]; value: Promise<unknown> }>();
  listening = false;
  /** When the subscription last answered a PING (0: never). */
  lastHeard = 0;
  heartbeat?: NodeJS.Timeout;

  /** Whether entries may live until a published change drops them: subscribed, and Redis answers. */
  trusted(now: number): boolean {
    return this.listening && now - this.lastHeard < SUBSCRIBER_DEAF_AFTER_MS;
  }

  /** The current slot of each key, loading the missing or expired ones with one query. */
  slots(db: Knex, keys: readonly SystemConfigKey[]): Slot[] {
    const now = Date.now();
    const trusted = this.trusted(now);
    let missing: SystemConfigKey[] | undefined;
    for (const k of keys) {
      const slot = this.entries.get(k);
      if (!slot || (!trusted && now - slot.at > UNLISTENED_MAX_AGE_MS)) (missing ??= []).push(k);
    }
    if (missing) {
      // One query for every key missing; each key's slot holds its share of the answer. The slot is
      // stored before the query runs: an invalidation arriving meanwhile deletes it, so a value read
      // before the change is never kept.
      const load = readConfigs(db, missing);
      for (const k of missing) {
        const value = load.then((v) => v[k]);
        const slot = { at: now, value };
        this.entries.set(k, slot);
        value.catch(() => {
          if (this.entries.get(k) === slot) this.entries.delete(k);
        });
      }
    }
    return keys.map((k) => this.entries.get(k)!);
  }

  get<K extends SystemConfigKey>(db: Knex, keys: readonly K[]): Promise<{ [P in K]: SystemConfigValue<P> }> {
    return Promise.all(this.slots(db, keys).map((s) => s.value)).then((values) => {
      const out = {} as { [P in K]: SystemConfigValue<P> };
      keys.forEach((k, i) => (out[k] = values[i] as (typeof out)[K]));
      return out;
    });
  }

  view<K extends SystemConfigKey, T>(
    db: Knex,
    name: string,
    keys: readonly K[],
    build: (v: { [P in K]: SystemConfigValue<P> }) => T,
  ): Promise<T> {
    const slots = this.slots(db, keys);
    const memo = this.views.get(name);
    if (memo && memo.slots.length === slots.length && memo.slots.every((s, i) => s === slots[i]))
      return memo.value as Promise<T>;
    const value = this.get(db, keys).then(build);
    this.views.set(name, { slots, value });
    return value;
  }

  invalidate(key?: string): void {
    if (key === undefined) this.entries.clear();
    else this.entries.delete(key);
    // Views notice by slot identity; dropping them all only frees memory early.
    if (key === undefined) this.views.clear();
  }
}

const caches = new WeakMap<Knex, ConfigCache>();
function cacheOf(db: Knex): ConfigCache {
  let c = caches.get(db);
  if (!c) caches.set(db, (c = new ConfigCache()));
  return c;
}

/** Declared values through the process cache (hot paths); see the module comment for freshness. */
export function cachedConfigs<K extends SystemConfigKey>(
  db: Knex,
  keys: readonly K[],
): Promise<{ [P in K]: SystemConfigValue<P> }> {
  return cacheOf(db).get(db, keys);
}

/**
 * A value derived from several keys (a hot path's config object), rebuilt only when one of the
 * keys' cached values was replaced: a cache hit costs a map lookup per key and no allocation.
 * `name` identifies the view within the process.
 */
export function cachedView<K extends SystemConfigKey, T>(
  db: Knex,
  name: string,
  keys: readonly K[],
  build: (v: { [P in K]: SystemConfigValue<P> }) => T,
): Promise<T> {
  return cacheOf(db).view(db, name, keys, build);
}

/** One declared value through the process cache. */
export async function cachedConfig<K extends SystemConfigKey>(db: Knex, key: K): Promise<SystemConfigValue<K>> {
  return (await cacheOf(db).get(db, [key]))[key];
}

/** Drops this process's cached value of `key` (every key when omitted). */
export function invalidateCachedConfig(db: Knex, key?: string): void {
  caches.get(db)?.invalidate(key);
}

/** Wire format on PubSub.systemConfigChanged. */
export interface ConfigChangeMessage {
  key: string;
}

/** Tells every process that `key` changed (call after the change committed). */
export async function publishConfigChange(
  redis: Redis,
  config: Pick<Config, 'redisPrefix'>,
  key: string,
): Promise<void> {
  await redis.publish(
    redisKey(config, PubSub.systemConfigChanged),
    JSON.stringify({ key } satisfies ConfigChangeMessage),
  );
}

/**
 * Subscribes `subscriber` (a connection in subscriber mode, shared with other channels) to config
 * changes for the cache of `db`. Until the subscription is confirmed, and whenever the connection is
 * down, the cache falls back to its one-second lifetime; every (re)connection drops the cache, as
 * changes published meanwhile were missed. Waits at most a second, and only for a connected Redis.
 */
export async function listenForConfigChanges(
  subscriber: Redis,
  config: Pick<Config, 'redisPrefix'>,
  db: Knex,
  logger: Logger,
): Promise<void> {
  const cache = cacheOf(db);
  const channel = redisKey(config, PubSub.systemConfigChanged);
  subscriber.on('message', (ch: string, raw: string) => {
    if (ch !== channel) return;
    try {
      cache.invalidate((JSON.parse(raw) as ConfigChangeMessage).key);
    } catch {
      cache.invalidate();
    }
  });
  let subscribedOnce = false;
  subscriber.on('close', () => {
    cache.listening = false;
    cache.invalidate();
  });
  subscriber.on('ready', () => {
    // ioredis re-subscribes right after a reconnect, ahead of other traffic.
    cache.invalidate();
    cache.listening = subscribedOnce;
  });
  const subscribed = subscriber.subscribe(channel).then(
    () => {
      subscribedOnce = true;
      cache.invalidate();
      cache.listening = true;
      cache.lastHeard = Date.now();
    },
    (err: Error) => logger.warn({ err: err.message }, 'system config subscribe failed'),
  );
  // One PING at a time; an answer after a silence drops what was cached before it, as a change
  // published during the silence may arrive only now.
  let pinging = false;
  clearInterval(cache.heartbeat);
  cache.heartbeat = setInterval(() => {
    if (pinging || subscriber.status !== 'ready') return;
    pinging = true;
    subscriber.ping().then(
      () => {
        pinging = false;
        const now = Date.now();
        if (cache.lastHeard && now - cache.lastHeard >= SUBSCRIBER_DEAF_AFTER_MS) cache.invalidate();
        cache.lastHeard = now;
      },
      () => (pinging = false),
    );
  }, SUBSCRIBER_HEARTBEAT_MS);
  cache.heartbeat.unref();
  subscriber.once('end', () => clearInterval(cache.heartbeat));
  // With Redis down the process starts at once (values are then re-read after a second at most).
  if (subscriber.status === 'ready') await Promise.race([subscribed, new Promise((r) => setTimeout(r, 1000).unref())]);
}

/** Stops trusting the cache of `db` beyond the short lifetime (the process closes its subscriber). */
export function stopListeningForConfigChanges(db: Knex): void {
  const c = caches.get(db);
  if (c) {
    clearInterval(c.heartbeat);
    c.listening = false;
    c.invalidate();
  }
}
