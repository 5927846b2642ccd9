import type { Knex } from 'knex';

/**
 * retired_key_hashes keeps the replaced values of system keys only (shared/commands/apiKeys.ts
 * regenerateApiKey): start-up refuses to store one of them again from SYSTEM_API_KEY. Earlier builds
 * also kept every other key's replaced value, a row per regeneration that nothing read or deleted.
 * Those rows go; a system key cannot be deleted, so its rows all stay.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw(
    `DELETE FROM retired_key_hashes r
      WHERE r.api_key_id IS NOT NULL
        AND NOT EXISTS (SELECT 1 FROM api_keys k WHERE k.id = r.api_key_id AND k.is_system)`,
  );
}

export async function down(): Promise<void> {
  // The deleted rows named values no start-up could bring back: nothing to restore.
}
