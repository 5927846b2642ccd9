import type { Knex } from 'knex';
import { conflict } from '../errors';

/**
 * Refuses (409) a change that leaves no administrator: no live user (not deleted, no deletion
 * scheduled) holding a role that grants `*:*`. Called inside the changing transaction, after the
 * change. The lock serialises such changes, so two administrators demoting each other at once
 * cannot both succeed: the second one's check (a new statement, read committed) sees the first.
 * Without it the last administrator could demote or delete themselves, and only the CLI
 * (`grant-role`) could administer the service again.
 */
export async function keepAnAdministrator(trx: Knex.Transaction): Promise<void> {
  await trx.raw('SELECT pg_advisory_xact_lock(hashtext(?))', ['service.administrators']);
  const { rows } = await trx.raw<{ rows: Array<{ ok: boolean }> }>(
    `SELECT EXISTS (
       SELECT 1 FROM user_roles ur
       JOIN role_permissions rp ON rp.role_id = ur.role_id
       JOIN permissions p ON p.id = rp.permission_id
       JOIN users u ON u.id = ur.user_id
       WHERE p.resource = '*' AND p.action = '*' AND u.deleted_at IS NULL AND u.scheduled_deletion_at IS NULL
     ) AS ok`,
  );
  if (!rows[0].ok)
    throw conflict('this would leave no administrator (a user holding *:*): give another user the Admin role first');
}
