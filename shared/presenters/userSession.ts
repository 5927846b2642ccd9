import type { Session } from '../models/Session';
import { parseUserAgent } from '../userAgent';
import { z } from '../zod';
import { iso } from './iso';

/** Session (user-visible, spec §2) with the device parsed from its user agent. */
export const userSessionSchema = z.object({
  id: z.string(),
  ip_address: z.string(),
  user_agent: z.string().describe('as sent; empty when the client sent none'),
  device_type: z.enum(['desktop', 'mobile', 'tablet']),
  browser_name: z.string().describe('name and major version; Unknown when the user agent does not say'),
  os_name: z.string().describe('name and version; Unknown when the user agent does not say'),
  provider: z.string().describe('platform slug; empty when the session was made without one'),
  provider_name: z.string(),
  last_activity_at: z.string(),
  created_at: z.string(),
  expires_at: z.string(),
  is_current: z.boolean(),
});

/** The caller's own sessions, the current one marked (GET /v1/users/me/sessions). */
export const userSessionListSchema = z.object({
  sessions: z.array(userSessionSchema),
  current_session_id: z.string(),
  _links: z.object({ self: z.string() }),
});

/** What a parsed user agent or a display name says when there is nothing to say. */
const UNKNOWN = 'Unknown';

/**
 * A session's client and provider as spec §2 types them, all strings: an absent user agent or
 * provider is '', a device the user agent does not name is 'Unknown'. `platformNames` maps
 * platform slugs to display names. Shared by the session list and the data export.
 */
export function describeSession(
  s: Pick<Session, 'user_agent' | 'platform_slug'>,
  platformNames: Map<string, string>,
): {
  user_agent: string;
  device_type: 'desktop' | 'mobile' | 'tablet';
  browser_name: string;
  os_name: string;
  provider: string;
  provider_name: string;
} {
  const ua = parseUserAgent(s.user_agent);
  return {
    user_agent: s.user_agent ?? '',
    device_type: ua.device_type,
    browser_name: ua.browser ?? UNKNOWN,
    os_name: ua.os ?? UNKNOWN,
    provider: s.platform_slug ?? '',
    provider_name: s.platform_slug ? (platformNames.get(s.platform_slug) ?? s.platform_slug) : UNKNOWN,
  };
}

/** One session of the caller's list; `platformNames` maps platform slugs to display names. */
function presentUserSession(
  s: Session,
  currentSessionId: string | null,
  platformNames: Map<string, string>,
): z.infer<typeof userSessionSchema> {
  return {
    id: s.id,
    ip_address: s.ip_address ?? '',
    ...describeSession(s, platformNames),
    last_activity_at: iso(s.last_activity_at),
    created_at: iso(s.created_at),
    expires_at: iso(s.expires_at),
    is_current: s.id === currentSessionId,
  };
}

/** The list answer of GET /v1/users/me/sessions. */
export function presentUserSessions(
  sessions: Session[],
  currentSessionId: string,
  platformNames: Map<string, string>,
  self: string,
): z.infer<typeof userSessionListSchema> {
  return {
    sessions: sessions.map((s) => presentUserSession(s, currentSessionId, platformNames)),
    current_session_id: currentSessionId,
    _links: { self },
  };
}
