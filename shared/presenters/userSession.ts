import type { Session } from '../models/Session';
import { parseUserAgent } from '../userAgent';
import { iso } from './iso';

/** Session (user-visible, spec §2) with the device parsed from its user agent. */
export function presentUserSession(s: Session, currentSessionId: string | null, platformNames: Map<string, string>) {
  const ua = parseUserAgent(s.user_agent);
  return {
    id: s.id,
    ip_address: s.ip_address,
    user_agent: s.user_agent,
    device_type: ua.device_type,
    browser_name: ua.browser,
    os_name: ua.os,
    provider: s.platform_slug,
    provider_name: s.platform_slug ? (platformNames.get(s.platform_slug) ?? s.platform_slug) : null,
    last_activity_at: iso(s.last_activity_at),
    created_at: iso(s.created_at),
    expires_at: iso(s.expires_at),
    is_current: s.id === currentSessionId,
  };
}
