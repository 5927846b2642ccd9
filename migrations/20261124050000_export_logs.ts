import type { Knex } from 'knex';

/**
 * Export log (spec §2 Export log entry): one row per personal data export handed to its user, with
 * where it was asked from, the archive's size and the report's locale. The user lists their own
 * newest first (GET /v1/user/export/logs), so the index leads with the user.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('export_logs', (t) => {
    t.uuid('id').primary().defaultTo(knex.raw('gen_random_uuid()'));
    t.uuid('user_id').notNullable().references('users.id').onDelete('CASCADE');
    t.timestamp('exported_at', { useTz: true }).notNullable();
    t.string('ip_address', 64).nullable();
    t.text('user_agent').nullable();
    t.string('export_format', 16).notNullable().defaultTo('zip');
    t.bigInteger('file_size_bytes').notNullable();
    t.string('locale', 10).notNullable();
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.index(['user_id', 'exported_at']);
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTableIfExists('export_logs');
}
