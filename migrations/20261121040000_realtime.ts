import type { Knex } from 'knex';

/**
 * Chat bot settings (spec §2 "Chat bot global settings" and "Chat guild settings"), read and
 * written by chat bots over the realtime protocol (ChatSettingsRequest 120) and by the chat REST
 * endpoints. Created only when absent, so the chat module may own them later without a clash.
 */
export async function up(knex: Knex): Promise<void> {
  if (!(await knex.schema.hasTable('chat_bot_settings'))) {
    await knex.schema.createTable('chat_bot_settings', (t) => {
      // One global row: the primary key is pinned to 1.
      t.integer('id').primary().defaultTo(1);
      t.boolean('auto_sync_enabled').notNullable().defaultTo(true);
      t.integer('sync_interval_seconds').notNullable().defaultTo(3600);
      t.integer('initial_delay_seconds').notNullable().defaultTo(30);
      t.string('default_language', 16).notNullable().defaultTo('en');
      t.boolean('notify_on_guild_join').notNullable().defaultTo(true);
      t.boolean('notify_on_guild_leave').notNullable().defaultTo(true);
      t.integer('command_cooldown_seconds').notNullable().defaultTo(3);
      t.timestamp('updated_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    });
    await knex.raw('ALTER TABLE chat_bot_settings ADD CONSTRAINT chat_bot_settings_singleton CHECK (id = 1)');
    await knex('chat_bot_settings').insert({ id: 1 });
  }
  if (!(await knex.schema.hasTable('chat_guild_settings'))) {
    await knex.schema.createTable('chat_guild_settings', (t) => {
      // The guild's snowflake: settings may exist before the guild's first sync.
      t.string('guild_id', 32).primary();
      t.string('default_language', 16).nullable();
      t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
      t.timestamp('updated_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    });
  }
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTableIfExists('chat_guild_settings');
  await knex.schema.dropTableIfExists('chat_bot_settings');
}
