import type { Knex } from 'knex';
import {
  type AuthInvalidation,
  type EventBus,
  type ServerPush,
  SUBSCRIBER_DEAF_AFTER_MS,
  SUBSCRIBER_HEARTBEAT_MS,
} from '../events';
import type { Logger } from '../logger';
import type { UserAccessSnapshot } from '../queries/access';
import { publishChatPermissionChanges } from './chatUserEvents';
import { deferToOutbox, type OutboxRelay } from '../outbox';

/** What credential invalidation and access pushes need: the bus, a logger, this instance's cache. */
export interface AccessServices {
  db: Knex;
  bus: EventBus;
  logger: Logger;
  /** This instance's credential cache (the API has one; workers do not). */
  credentials?: { invalidate(msg: AuthInvalidation): void; silentForMs?(): number };
}

const same = (a: string[], b: string[]) => a.length === b.length && a.every((x, i) => x === b[i]);
const NOTHING: UserAccessSnapshot = { permissions: [], roleIds: [], roles: [] };

/**
 * After the commit: tells each user of `after` what they now hold. With `before`, permissionsUpdated
 * goes only where the effective set differs and rolesUpdated only where the role list (ids or names)
 * differs; without it both go to everyone. `roleChange` adds rolePermissionsChanged for every user
 * of `before` (the holders of the changed role) so clients refresh. A push that cannot go out is
 * logged: the change is committed and must not turn into a failed request.
 */
export async function publishAccessChanges(
  services: Pick<AccessServices, 'bus' | 'logger' | 'db'>,
  after: Map<string, UserAccessSnapshot>,
  opts: { before?: Map<string, UserAccessSnapshot>; roleChange?: { roleId: string; roleName: string } } = {},
): Promise<void> {
  const timestamp = new Date().toISOString();
  const pushes: Array<[string, ServerPush]> = [];
  const permissionChanges: Array<{ userId: string; permissions: string[] }> = [];
  for (const userId of opts.before?.keys() ?? after.keys()) {
    const a = after.get(userId) ?? NOTHING;
    const b = opts.before?.get(userId);
    const { roleChange } = opts;
    if (roleChange) {
      const { roleId, roleName } = roleChange;
      pushes.push([userId, { type: 'rolePermissionsChanged', roleId, roleName, timestamp }]);
    }
    if (!b || !same(a.permissions, b.permissions)) {
      pushes.push([userId, { type: 'permissionsUpdated', userId, permissions: a.permissions, timestamp }]);
      permissionChanges.push({ userId, permissions: a.permissions });
    }
    if (!b || !same(a.roleIds, b.roleIds) || !same(a.roles, b.roles)) {
      pushes.push([userId, { type: 'rolesUpdated', userId, roles: a.roles, roleIds: a.roleIds, timestamp }]);
    }
  }
  try {
    await services.bus.publishMany(pushes.map(([userId, message]) => ({ channel: `user:${userId}`, message })));
  } catch (err) {
    services.logger.warn(
      { err: (err as Error).message, pushes: pushes.length },
      'could not publish access change pushes',
    );
  }
  // The chat bot hears about users with a linked chat account (ChatPermissionChanged, spec §6).
  await publishChatPermissionChanges(services, permissionChanges);
}

/** Beyond SUBSCRIBER_DEAF_AFTER_MS: a heartbeat timer that fires late on a busy instance. */
const DEAF_MARGIN_MS = 100;

/**
 * The one way to drop cached credentials after a committed change: at once on this instance (so
 * the caller's very next request sees it) and on every other api/realtime instance through Redis
 * pub/sub. Commands call it from `afterCommit`.
 */
export async function invalidateCredentials(
  services: Pick<AccessServices, 'bus' | 'logger' | 'credentials' | 'db'> & { outbox?: Pick<OutboxRelay, 'wake'> },
  msg: AuthInvalidation,
): Promise<void> {
  services.credentials?.invalidate(msg);
  const began = Date.now();
  // An instance that did not acknowledge may not have heard (Redis hung with its connections
  // open): once SUBSCRIBER_DEAF_AFTER_MS and one heartbeat (its PING goes out up to a beat after
  // its last answer) have passed since this began, it has stopped trusting its cache and realtime
  // holds its sockets' pushes (shared/auth/credentials.ts), so the change holds there on the very
  // next request too. When this instance's own subscription has been silent that long already, so
  // have the others': a long outage costs only its first narrowing changes the wait.
  const outlastDeafness = () => {
    let until = began + SUBSCRIBER_DEAF_AFTER_MS + SUBSCRIBER_HEARTBEAT_MS + DEAF_MARGIN_MS;
    const silent = services.credentials?.silentForMs?.();
    if (silent !== undefined)
      until = Math.min(
        until,
        Date.now() + SUBSCRIBER_DEAF_AFTER_MS + SUBSCRIBER_HEARTBEAT_MS + DEAF_MARGIN_MS - silent,
      );
    return new Promise<void>((resolve) => setTimeout(resolve, Math.max(0, until - Date.now())));
  };
  try {
    if (!(await services.bus.invalidateAuth(msg))) await outlastDeafness();
  } catch (err) {
    await outlastDeafness();
    // Redis down or hung: the other instances (and their open WebSockets) would keep the old
    // credential. The outbox relay publishes it once Redis answers (a second delivery is harmless).
    await deferToOutbox(services, 'authInvalidation', msg, err, 'publish a credential invalidation');
  }
}
