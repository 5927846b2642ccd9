import type { Knex } from 'knex';

/**
 * The chat bot's global settings are one row (`id = 1`, a CHECK keeps it single), but spec §2's
 * ids are UUIDs unless stated otherwise: the row gets a UUID of its own, answered as its `id`.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw(
    'ALTER TABLE chat_bot_settings ADD COLUMN IF NOT EXISTS public_id uuid NOT NULL DEFAULT gen_random_uuid()',
  );
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('ALTER TABLE chat_bot_settings DROP COLUMN IF EXISTS public_id');
}
