import type { Knex } from 'knex';

/**
 * Chat bot data (spec §2 Chat guild, channel, member; roles are the project's): what the connected
 * chat bot reported at its last sync. Guilds are keyed by an internal UUID and by their snowflake;
 * channels, roles and members hang off the guild's UUID and go with it. `sync_id` marks the rows a
 * sync wrote, so what the bot no longer reports is deleted in the same transaction. The settings
 * tables (chat_bot_settings, chat_guild_settings) exist since 20261121040000_realtime.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('chat_guilds', (t) => {
    t.uuid('id').primary().defaultTo(knex.raw('gen_random_uuid()'));
    t.string('guild_id', 32).notNullable().unique();
    t.string('name', 255).notNullable();
    t.string('icon', 128).nullable();
    t.string('owner_id', 32).nullable();
    t.integer('member_count').notNullable().defaultTo(0);
    t.integer('boost_count').notNullable().defaultTo(0);
    t.smallint('premium_tier').notNullable().defaultTo(0);
    t.timestamp('bot_joined_at', { useTz: true }).nullable();
    t.timestamp('last_synced_at', { useTz: true }).nullable();
    t.timestamp('members_synced_at', { useTz: true }).nullable();
    t.timestamps(true, true);
    t.index(['name']);
  });
  await knex.raw(
    'ALTER TABLE chat_guilds ADD CONSTRAINT chat_guilds_premium_tier CHECK (premium_tier BETWEEN 0 AND 3)',
  );

  await knex.schema.createTable('chat_channels', (t) => {
    t.uuid('id').primary().defaultTo(knex.raw('gen_random_uuid()'));
    t.uuid('guild_id').notNullable().references('chat_guilds.id').onDelete('CASCADE');
    t.string('channel_id', 32).notNullable();
    t.string('name', 255).notNullable();
    t.integer('channel_type_raw').notNullable();
    t.string('parent_id', 32).nullable();
    t.integer('position').notNullable().defaultTo(0);
    t.text('topic').nullable();
    t.boolean('nsfw').notNullable().defaultTo(false);
    t.uuid('sync_id').nullable();
    t.timestamps(true, true);
    t.unique(['guild_id', 'channel_id']);
  });

  await knex.schema.createTable('chat_roles', (t) => {
    t.uuid('id').primary().defaultTo(knex.raw('gen_random_uuid()'));
    t.uuid('guild_id').notNullable().references('chat_guilds.id').onDelete('CASCADE');
    t.string('role_id', 32).notNullable();
    t.string('name', 255).notNullable();
    t.integer('position').notNullable().defaultTo(0);
    t.integer('color').notNullable().defaultTo(0);
    t.string('permissions', 32).notNullable().defaultTo('0');
    t.uuid('sync_id').nullable();
    t.timestamps(true, true);
    t.unique(['guild_id', 'role_id']);
  });

  await knex.schema.createTable('chat_members', (t) => {
    t.uuid('id').primary().defaultTo(knex.raw('gen_random_uuid()'));
    t.uuid('guild_id').notNullable().references('chat_guilds.id').onDelete('CASCADE');
    t.string('user_id', 32).notNullable();
    t.string('username', 255).notNullable();
    t.string('discriminator', 8).notNullable().defaultTo('0');
    t.string('global_name', 255).nullable();
    t.string('nickname', 255).nullable();
    t.string('avatar', 128).nullable();
    t.boolean('bot').notNullable().defaultTo(false);
    t.boolean('system').notNullable().defaultTo(false);
    t.timestamp('joined_at', { useTz: true }).nullable();
    t.timestamp('premium_since', { useTz: true }).nullable();
    t.boolean('deaf').notNullable().defaultTo(false);
    t.boolean('mute').notNullable().defaultTo(false);
    t.boolean('pending').notNullable().defaultTo(false);
    t.timestamp('communication_disabled_until', { useTz: true }).nullable();
    t.specificType('roles', 'text[]').notNullable().defaultTo(knex.raw("'{}'::text[]"));
    t.uuid('sync_id').nullable();
    t.timestamps(true, true);
    t.unique(['guild_id', 'user_id']);
  });
  // The member list's order (display name, then id) and the has_role filter.
  await knex.raw(
    'CREATE INDEX chat_members_display_order ON chat_members (guild_id, lower(coalesce(nickname, global_name, username)), user_id)',
  );
  await knex.raw('CREATE INDEX chat_members_roles ON chat_members USING gin (roles)');
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTableIfExists('chat_members');
  await knex.schema.dropTableIfExists('chat_roles');
  await knex.schema.dropTableIfExists('chat_channels');
  await knex.schema.dropTableIfExists('chat_guilds');
}
