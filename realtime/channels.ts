import { can, isSuperAdmin, Principal } from '../shared/policies';

/**
 * Channel access rules of spec §4.26, decided with the shared policy module.
 * Returns null when allowed, else the refusal message.
 */
export function subscriptionRefusal(p: Principal, channel: string): string | null {
  if (!/^[A-Za-z0-9_:.\-]{1,200}$/.test(channel)) return `invalid channel name: ${channel}`;
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
