import type { Knex } from 'knex';

/** audit.retention_days from system_config: a positive number of days, else null (keep everything). */
export async function readAuditRetentionDays(db: Knex): Promise<number | null> {
  const row: { value: unknown } | undefined = await db('system_config')
    .where('key', 'audit.retention_days')
    .first('value');
  const v = row?.value;
  return typeof v === 'number' && Number.isFinite(v) && v > 0 ? v : null;
}

/** Per run: batches of 5,000 rows, at most 400 of them (2,000,000 rows; docs/audit.md "Retention"). */
export const AUDIT_PURGE_DEFAULTS = { batchSize: 5000, maxBatches: 400 } as const;

/**
 * Deletes audit events older than audit.retention_days, oldest first, in batches of `batchSize`
 * rows: each batch is its own short statement (the created_at index finds it), so no lock is held
 * for long and writers are never blocked. Reports of deleted events go with them. At most
 * `maxBatches` per run; the next run continues. Returns how many went and in how many batches.
 */
export async function purgeExpiredAuditEvents(
  db: Knex,
  opts: { batchSize?: number; maxBatches?: number } = {},
): Promise<{ deleted: number; batches: number }> {
  const batchSize = opts.batchSize ?? AUDIT_PURGE_DEFAULTS.batchSize;
  const maxBatches = opts.maxBatches ?? AUDIT_PURGE_DEFAULTS.maxBatches;
  const days = await readAuditRetentionDays(db);
  if (days === null) return { deleted: 0, batches: 0 };
  const cutoff = new Date(Date.now() - days * 86_400_000);
  let deleted = 0;
  let batches = 0;
  while (batches < maxBatches) {
    const { rowCount } = await db.raw(
      `DELETE FROM audit_events WHERE id IN (
         SELECT id FROM audit_events WHERE created_at < ? ORDER BY created_at LIMIT ? FOR UPDATE SKIP LOCKED)`,
      [cutoff, batchSize],
    );
    batches++;
    deleted += rowCount ?? 0;
    if (!rowCount || rowCount < batchSize) break;
  }
  return { deleted, batches };
}
