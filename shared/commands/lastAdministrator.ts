import type { Knex } from 'knex';
import { conflict } from '../errors';

/**
 * Refuses (409) a change that leaves no administrator: no live user (not deleted, no deletion
 * scheduled, not banned) holding a role that grants `*:*`. Called inside the changing transaction,
 * after the change: taking a role from a user, deleting or scheduling the deletion of a user,
 * banning one, and taking `*:*` from a role or deleting a role. The lock serialises such changes, so two administrators demoting each other at once
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
         AND NOT EXISTS (
           SELECT 1 FROM bans b WHERE b.user_id = u.id AND b.unbanned_at IS NULL
             AND (b.expires_at IS NULL OR b.expires_at > now())
         )
     ) AS ok`,
  );
  if (!rows[0].ok)
    throw conflict('this would leave no administrator (a user holding *:*): give another user the Admin role first');
}

/** Whether the user holds `*:*` through a role (is an administrator, live or not). */
export async function holdsEverything(trx: Knex.Transaction, userId: string): Promise<boolean> {
  const { rows } = await trx.raw<{ rows: Array<{ yes: boolean }> }>(
    `SELECT EXISTS (
       SELECT 1 FROM user_roles ur
       JOIN role_permissions rp ON rp.role_id = ur.role_id
       JOIN permissions p ON p.id = rp.permission_id
       WHERE ur.user_id = ? AND p.resource = '*' AND p.action = '*'
     ) AS yes`,
    [userId],
  );
  return rows[0].yes;
}

/** Whether the role grants `*:*` (read before a change that could take it away). */
export async function roleGrantsEverything(trx: Knex.Transaction, roleId: string): Promise<boolean> {
  const { rows } = await trx.raw<{ rows: Array<{ yes: boolean }> }>(
    `SELECT EXISTS (
       SELECT 1 FROM role_permissions rp JOIN permissions p ON p.id = rp.permission_id
       WHERE rp.role_id = ? AND p.resource = '*' AND p.action = '*'
     ) AS yes`,
    [roleId],
  );
  return rows[0].yes;
}
