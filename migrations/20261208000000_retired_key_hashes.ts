import type { Knex } from 'knex';

/**
 * The hashes of API key values replaced by a regeneration. SYSTEM_API_KEY is stored again at every
 * api start; without this a system key regenerated through the API (because its value leaked, say)
 * came back at the next start beside its replacement. Start-up refuses to store a retired value.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('retired_key_hashes', (t) => {
    t.string('key_hash', 64).primary();
    t.uuid('api_key_id').nullable();
    t.timestamp('retired_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTableIfExists('retired_key_hashes');
}
