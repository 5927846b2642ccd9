import type { Knex } from 'knex';

/**
 * A system key belongs to no user (docs/access-control.md): its power never came from an owner,
 * but earlier builds let `create-api-key --system --user <u>` store one, and the owner then
 * decided its life. Deleting that account switched the key off for good (a system key cannot be
 * switched on, off or deleted through the API), and purging it deleted the row (ON DELETE
 * CASCADE). Owned system keys lose their owner; one the owner's deletion switched off (locked,
 * inactive) is switched back on, since nothing else can switch a system key off. A CHECK keeps
 * every system key ownerless from here on.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw(
    `UPDATE api_keys
        SET is_active = is_active OR locked, locked = false, user_id = NULL, updated_at = now()
      WHERE is_system AND user_id IS NOT NULL`,
  );
  await knex.raw(
    'ALTER TABLE api_keys ADD CONSTRAINT api_keys_system_ownerless CHECK (NOT is_system OR user_id IS NULL)',
  );
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('ALTER TABLE api_keys DROP CONSTRAINT IF EXISTS api_keys_system_ownerless');
}
