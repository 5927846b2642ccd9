import type { Knex } from 'knex';

/**
 * System settings (spec §4.9, decisions.md "Settings"): free-form values addressed by key, some
 * public (GET /v1/settings/public). System config entries stay in system_config, seeded from the
 * declarations in shared/systemConfig.ts.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('settings', (t) => {
    t.string('key', 100).primary();
    t.jsonb('value').notNullable();
    t.text('description').nullable();
    t.boolean('is_public').notNullable().defaultTo(false);
    t.timestamps(true, true);
  });
  await knex.raw('CREATE INDEX settings_public ON settings (key) WHERE is_public');
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTableIfExists('settings');
}
