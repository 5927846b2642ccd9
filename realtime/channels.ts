import { CHAT_BOTS_WS_CHANNEL } from '../shared/events';
import { can, isSuperAdmin, Principal } from '../shared/policies';

/**
 * Channel access rules of spec §4.26, decided with the shared policy module.
 * Returns null when allowed, else the refusal message.
 *
 * | channel               | rule                                                     |
 * | user:{id}             | only that user (never API keys); auto-subscribed          |
 * | admin:*               | admin:read or super admin                                 |
 * | public, public:*      | anyone, anonymous included                                |
 * | gps, gps:*            | gps:read                                                  |
 * | geofence, geofence:*  | geofences:read                                            |
 * | vessels               | anyone, anonymous included                                |
 */
export function subscriptionRefusal(p: Principal, channel: string): string | null {
  if (!/^[A-Za-z0-9_:.\-]{1,200}$/.test(channel)) return `invalid channel name: ${channel.slice(0, 200)}`;
  const denied = `access denied to channel ${channel}`;
  if (channel === 'vessels') return null;
  if (channel === 'public' || channel.startsWith('public:')) return null;
  if (p.kind === 'anonymous') return denied;
  if (channel.startsWith('user:')) {
    return p.kind === 'user' && channel === `user:${p.userId}` ? null : denied;
  }
  if (channel.startsWith('admin:')) return can(p, 'admin:read') || isSuperAdmin(p) ? null : denied;
  if (channel === 'gps' || channel.startsWith('gps:')) return can(p, 'gps:read') ? null : denied;
  if (channel === 'geofence' || channel.startsWith('geofence:')) return can(p, 'geofences:read') ? null : denied;
  return `unknown channel ${channel}`;
}

/** Channels the server subscribes connections to itself; clients can neither join nor leave them. */
export function isInternalChannel(channel: string): boolean {
  return channel === CHAT_BOTS_WS_CHANNEL;
}

/** Whether a principal may act as a chat bot connection (receive sync and moderation requests). */
export function mayBeChatBot(p: Principal): boolean {
  return p.kind === 'system' || (p.kind === 'apiKey' && can(p, 'chat:sync'));
}

/**
 * Whether a socket may keep a channel after its principal changed: the normal rule, and for the
 * internal chat bot channel the chat bot rule.
 */
export function retainRefusal(p: Principal, channel: string): string | null {
  if (channel === CHAT_BOTS_WS_CHANNEL) return mayBeChatBot(p) ? null : `access denied to channel ${channel}`;
  return subscriptionRefusal(p, channel);
}
