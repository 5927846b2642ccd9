import type { Session } from '../models/Session';
import { parseUserAgent } from '../userAgent';

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
    last_activity_at: new Date(s.last_activity_at).toISOString(),
    created_at: new Date(s.created_at).toISOString(),
    expires_at: new Date(s.expires_at).toISOString(),
    is_current: s.id === currentSessionId,
  };
}
