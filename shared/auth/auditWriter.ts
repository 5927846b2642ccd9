import type Redis from 'ioredis';
import type { Config } from '../config';
import { forbidden, serviceUnavailable, unauthorized } from '../errors';
import { authorizePermission, Principal } from '../policies';
import { appForKey, verifyAppAssertion } from './assertionVerifier';

/**
 * Who writes an audit event through the ingestion endpoints (POST /v1/internal/audit, GraphQL
 * createAuditEvent, the realtime CreateAuditEventRequest) and what an app may attribute.
 */

/** The header carrying an internal app's secret (ID_APPS). */
export const APP_KEY_HEADER = 'x-id-app-key';

export interface AuditWriter {
  /** The internal app that authenticated with X-ID-App-Key, or null for a credential with audit:write. */
  appId: string | null;
}

/** A credential already authorised to write audit events (the realtime process checked audit:write). */
export const CREDENTIAL_WRITER: AuditWriter = { appId: null };

/**
 * Who is writing: an internal app by X-ID-App-Key (constant-time match against ID_APPS), or a
 * credential holding audit:write (the system key holds everything). Anything else is 401/403.
 */
export function auditWriter(
  config: Pick<Config, 'idApps'>,
  principal: Principal,
  appKey: string | null | undefined,
): AuditWriter {
  if (appKey) {
    const appId = appForKey(config, appKey);
    if (!appId) throw unauthorized('invalid X-ID-App-Key');
    return { appId };
  }
  authorizePermission(principal, 'audit:write');
  return { appId: null };
}

/**
 * Spec §5.8 for an app writing with X-ID-App-Key: every field naming an end user (user_id,
 * actor_id) must be vouched for by an X-ID-App-Assertion from the same app whose subject is that
 * user. One assertion has one subject, so naming two different users is refused (403) before the
 * assertion is checked, and its nonce is not spent; an audit:write credential may write such events.
 */
export async function checkAppAttribution(
  deps: { config: Config; redis: Redis },
  appId: string,
  userId: string | null,
  actorId: string | null,
  assertion: string | null,
): Promise<void> {
  const named: Array<[field: string, id: string]> = [];
  if (userId) named.push(['user_id', userId]);
  if (actorId) named.push(['actor_id', actorId]);
  if (!named.length) return;
  const subjects = new Set(named.map(([, id]) => id));
  if (subjects.size > 1) {
    throw forbidden(
      'user_id and actor_id name different users: an app attributes an event to one end user only, its assertion subject',
    );
  }
  const a = await verifyAppAssertion(deps.config, deps.redis, assertion);
  if (!a.ok) {
    if (a.reason === 'unavailable') throw serviceUnavailable(a.message);
    throw unauthorized(`invalid X-ID-App-Assertion: ${a.message}`);
  }
  if (a.appId !== appId) throw unauthorized('X-ID-App-Assertion was issued by another app than X-ID-App-Key');
  if (!subjects.has(a.subject)) {
    throw unauthorized(`X-ID-App-Assertion subject does not match ${named.map(([field]) => field).join(' and ')}`);
  }
}
