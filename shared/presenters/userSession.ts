import type { Session } from '../models/Session';
import { parseUserAgent } from '../userAgent';
import { z } from '../zod';
import { iso } from './iso';

/** Session (user-visible, spec §2) with the device parsed from its user agent. */
export const userSessionSchema = z.object({
  id: z.string(),
  ip_address: z.string().nullable(),
  user_agent: z.string().nullable(),
  device_type: z.enum(['desktop', 'mobile', 'tablet']),
  browser_name: z.string().nullable(),
  os_name: z.string().nullable(),
  provider: z.string().nullable(),
  provider_name: z.string().nullable(),
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

/** One session of the caller's list; `platformNames` maps platform slugs to display names. */
function presentUserSession(
  s: Session,
  currentSessionId: string | null,
  platformNames: Map<string, string>,
): z.infer<typeof userSessionSchema> {
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
