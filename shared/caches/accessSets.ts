import type DataLoader from 'dataloader';
import type { Knex } from 'knex';
import { LRUCache } from 'lru-cache';
import type { AuthInvalidation } from '../events';
import { PermissionSet } from '../policies';
import { loadRolePermissions, loadUserAccessSets, UserAccessSet } from '../queries/access';
import { turnLoader } from '../rowLoader';

export type { UserAccessSet };

/** A user's access set with its permissions as a set, as the hierarchy check compares them. */
export interface CachedUserAccess extends UserAccessSet {
  permissionSet: PermissionSet;
}

/** User ids are UUIDs and Postgres compares them case-insensitively; invalidations name them in lower case. */
const userKey = (id: string) => id.toLowerCase();

/**
 * What users and roles hold (effective permissions, role ids, roles by name; a role's permissions),
 * cached in-process beside the credential cache that owns it (CredentialResolver.access) and
 * dropped by the same invalidations: `{userId}` drops that user, `{all}` (role permission changes,
 * role renames and deletions, seed) drops everything; `{apiKeyId}` changes nothing held here. The
 * rules are the credential cache's: nothing is cached or used from the cache while its invalidation
 * subscription is down or silent (`cacheable()` is false), and a load that raced with an
 * invalidation is used once, never cached.
 *
 * Misses of one event-loop turn share one query (`WHERE user_id = ANY(…)`).
 */
export class AccessSets {
  private readonly users = new LRUCache<string, CachedUserAccess>({ max: 50_000, ttl: 60_000 });
  private readonly roles = new LRUCache<string, PermissionSet>({ max: 10_000, ttl: 60_000 });
  private readonly userLoader: DataLoader<string, UserAccessSet>;
  /** Bumped by every invalidation (and clear). */
  private generation = 0;

  constructor(
    private readonly db: Knex,
    private readonly cacheable: () => boolean,
  ) {
    this.userLoader = turnLoader(async (ids) => {
      const sets = await loadUserAccessSets(this.db, ids);
      return ids.map((id) => sets.get(id)!);
    });
  }

  /** A user's effective permissions and roles (empty for a user without roles, or no such user). */
  async user(userId: string): Promise<CachedUserAccess> {
    const key = userKey(userId);
    // While the subscription cannot be trusted (down, or Redis silent) nothing cached is used either.
    const hit = this.cacheable() ? this.users.get(key) : undefined;
    if (hit) return hit;
    const generation = this.generation;
    const set = await this.userLoader.load(key);
    const entry: CachedUserAccess = { ...set, permissionSet: new PermissionSet(set.permissions) };
    if (generation === this.generation && this.cacheable()) this.users.set(key, entry);
    return entry;
  }

  /** The permissions a role grants (granting or taking the role needs all of them). */
  async role(roleId: string): Promise<PermissionSet> {
    const hit = this.cacheable() ? this.roles.get(roleId) : undefined;
    if (hit) return hit;
    const generation = this.generation;
    const set = new PermissionSet(await loadRolePermissions(this.db, roleId));
    if (generation === this.generation && this.cacheable()) this.roles.set(roleId, set);
    return set;
  }

  /** Applies an invalidation (CredentialResolver.invalidate calls it with every message it applies). */
  invalidate(msg: AuthInvalidation): void {
    this.generation++;
    if (msg.all) return this.clear();
    for (const id of msg.userIds ?? []) this.users.delete(userKey(id));
  }

  clear(): void {
    this.generation++;
    // lru-cache's clear() walks its whole preallocated storage even when empty.
    if (this.users.size) this.users.clear();
    if (this.roles.size) this.roles.clear();
  }
}
