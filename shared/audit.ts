import type { Knex } from 'knex';
import { geoLookup } from './geoip';
import { AuditEvent } from './models/AuditEvent';
import { SIDE_EFFECT_OUTBOX } from './outbox';

export const AUDIT_EVENT_TYPES = [
  'login',
  'login_failed',
  'logout',
  'session_created',
  'session_revoked',
  '2fa_enabled',
  '2fa_disabled',
  '2fa_verified',
  '2fa_backup_codes_regenerated',
  'password_changed',
  'password_reset_requested',
  'user_created',
  'user_updated',
  'user_deleted',
  'account_linked',
  'account_unlinked',
  'account_reconnected',
  'data_exported',
  'client_created',
  'client_updated',
  'client_secret_regenerated',
  'client_deleted',
  'consent_granted',
  'consent_revoked',
  'api_key_created',
  'api_key_revoked',
  'bot_command_executed',
  'bot_guild_configured',
] as const;
export type AuditEventType = (typeof AUDIT_EVENT_TYPES)[number];

/**
 * Every event_type the service itself records: the spec's list (what internal apps may write, see
 * ingestAuditEvent) and the changes of settings and system config, for which the spec's list has no
 * type (docs/settings.md). The audit lists filter by any of them.
 */
export const RECORDED_EVENT_TYPES = [
  ...AUDIT_EVENT_TYPES,
  'setting_created',
  'setting_updated',
  'setting_deleted',
  'system_config_updated',
] as const;

export const SOURCE_SERVICES = ['api', 'id', 'backend', 'policies', 'chat_bot', 'stream_bot'] as const;

export interface AuditInput {
  user_id?: string | null;
  event_type: string;
  resource_type?: string | null;
  resource_id?: string | null;
  actor_id?: string | null;
  ip_address?: string | null;
  user_agent?: string | null;
  description?: string | null;
  metadata?: Record<string, unknown>;
  status?: 'success' | 'failure';
  error_message?: string | null;
  source_service?: string;
}

/**
 * Who did something and from where: the one shape of audit attribution. The API builds it from the
 * request (`requestAttribution` in api/routing.ts), GraphQL from its context, the realtime process
 * and workers from the message; commands take it and write it with `attributed()`.
 */
export interface Attribution {
  /** The acting user, else the acting API key's id; null for the system itself. */
  actorId: string | null;
  ipAddress?: string | null;
  userAgent?: string | null;
}

/** An audit input with the attribution's actor, IP and user agent filled in. */
export function attributed(by: Attribution, input: AuditInput): AuditInput {
  return { actor_id: by.actorId, ip_address: by.ipAddress ?? null, user_agent: by.userAgent ?? null, ...input };
}

/** The columns of one audit_events row for `input`, geo-IP resolved now (at write time). */
export function auditRow(input: AuditInput): Record<string, unknown> {
  return {
    user_id: input.user_id ?? null,
    event_type: input.event_type,
    resource_type: input.resource_type ?? null,
    resource_id: input.resource_id ?? null,
    actor_id: input.actor_id ?? null,
    ip_address: input.ip_address ?? null,
    user_agent: input.user_agent ?? null,
    description: input.description ?? null,
    metadata: JSON.stringify(input.metadata ?? {}),
    status: input.status ?? 'success',
    error_message: input.error_message ?? null,
    source_service: input.source_service ?? 'api',
    ...geoLookup(input.ip_address),
  };
}

/**
 * Inserts rows (from `auditRow`) and, in the same statement, the side-effect outbox row that pushes
 * them to the live feed (`auditEvent` on `admin:audit`, shared/outbox.ts): one round trip, and the
 * push happens iff the rows commit.
 */
export async function insertAuditRows(rows: Array<Record<string, unknown>>, db: Knex | Knex.Transaction) {
  const { sql, bindings } = db('audit_events').insert(rows).returning('*').toSQL();
  const { rows: out } = await db.raw<{ rows: Array<Record<string, unknown>> }>(
    `WITH ev AS (${sql}),
          ob AS (INSERT INTO ${SIDE_EFFECT_OUTBOX} (kind, payload)
                 SELECT 'auditEvents', jsonb_build_object('ids', jsonb_agg(id)) FROM ev)
     SELECT * FROM ev`,
    bindings as Knex.RawBinding[],
  );
  return out.map((r) => AuditEvent.fromDatabaseJson(r));
}

/**
 * Runs `write` (an INSERT, UPDATE or DELETE with RETURNING) and records `input` in the same
 * statement, iff the write touched a row: the change, its audit event and the event's outbox row
 * commit together without a transaction, so the whole command is one round trip instead of four
 * (BEGIN, the write, the event, COMMIT). Returns the write's RETURNING rows (none: no event).
 */
export async function writeAudited(
  db: Knex,
  write: Knex.QueryBuilder,
  input: AuditInput,
): Promise<Array<Record<string, unknown>>> {
  const change = write.toSQL();
  const row = auditRow(input);
  const columns = Object.keys(row);
  // INSERT … SELECT keeps the parameters' types open, so each takes its column's type as in VALUES.
  const { rows } = await db.raw<{ rows: Array<Record<string, unknown>> }>(
    `WITH w AS (${change.sql}),
          ev AS (INSERT INTO audit_events (${columns.map(() => '??').join(', ')})
                 SELECT ${columns.map(() => '?').join(', ')} WHERE EXISTS (SELECT 1 FROM w) RETURNING id),
          ob AS (INSERT INTO ${SIDE_EFFECT_OUTBOX} (kind, payload)
                 SELECT 'auditEvents', jsonb_build_object('ids', jsonb_agg(id)) FROM ev HAVING count(*) > 0)
     SELECT * FROM w`,
    [...(change.bindings as Knex.RawBinding[]), ...columns, ...columns.map((c) => row[c] as Knex.RawBinding)],
  );
  return rows;
}

/** Writes one audit event (inside `trx` when given, so it commits with the change it records). */
export async function recordAuditEvent(input: AuditInput, trx: Knex | Knex.Transaction): Promise<AuditEvent> {
  const [event] = await insertAuditRows([auditRow(input)], trx);
  return event!;
}

/** Writes several audit events of one change in one statement (e.g. `login` and `session_created`). */
export async function recordAuditEvents(inputs: AuditInput[], trx: Knex | Knex.Transaction): Promise<AuditEvent[]> {
  if (inputs.length === 0) return [];
  return insertAuditRows(inputs.map(auditRow), trx);
}
