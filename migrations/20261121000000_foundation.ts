import type { Knex } from 'knex';

/** Foundation schema: identities, credentials, RBAC, bans, config, audit log and the email outbox. */
export async function up(knex: Knex): Promise<void> {
  await knex.raw('CREATE EXTENSION IF NOT EXISTS pgcrypto');

  await knex.schema.createTable('platforms', (t) => {
    t.uuid('id').primary().defaultTo(knex.raw('gen_random_uuid()'));
    t.string('name', 100).notNullable();
    t.string('slug', 50).notNullable().unique();
    t.boolean('is_oauth').notNullable().defaultTo(true);
    t.boolean('enabled').notNullable().defaultTo(true);
    t.boolean('two_factor_supported').notNullable().defaultTo(false);
    t.boolean('two_factor_required').notNullable().defaultTo(false);
    t.timestamps(true, true);
  });

  await knex.schema.createTable('users', (t) => {
    t.uuid('id').primary().defaultTo(knex.raw('gen_random_uuid()'));
    t.string('username', 30).notNullable();
    t.uuid('primary_platform_account_id').nullable();
    t.timestamps(true, true);
    t.timestamp('last_login_at', { useTz: true }).nullable();
    t.timestamp('deleted_at', { useTz: true }).nullable();
    t.timestamp('scheduled_deletion_at', { useTz: true }).nullable();
    t.boolean('privacy_mode').notNullable().defaultTo(false);
    t.string('preferred_locale', 10).nullable();
    t.boolean('avatars_enabled').notNullable().defaultTo(true);
  });
  await knex.raw('CREATE UNIQUE INDEX users_username_lower_unique ON users (lower(username))');

  await knex.schema.createTable('platform_accounts', (t) => {
    t.uuid('id').primary().defaultTo(knex.raw('gen_random_uuid()'));
    t.uuid('user_id').notNullable().references('users.id').onDelete('CASCADE');
    t.uuid('platform_id').notNullable().references('platforms.id');
    t.string('platform_user_id', 255).notNullable();
    t.boolean('is_oauth').notNullable().defaultTo(true);
    t.boolean('is_primary').notNullable().defaultTo(false);
    t.string('username', 255).nullable();
    t.string('email', 320).nullable();
    t.text('avatar_url').nullable();
    t.text('password_hash').nullable();
    t.timestamp('email_verified_at', { useTz: true }).nullable();
    t.timestamps(true, true);
    t.unique(['platform_id', 'platform_user_id']);
    t.index(['user_id']);
  });
  await knex.raw('CREATE INDEX platform_accounts_email_lower ON platform_accounts (lower(email))');
  await knex.schema.alterTable('users', (t) => {
    t.foreign('primary_platform_account_id').references('platform_accounts.id').onDelete('SET NULL');
  });

  await knex.schema.createTable('sessions', (t) => {
    t.uuid('id').primary().defaultTo(knex.raw('gen_random_uuid()'));
    t.string('token_hash', 64).notNullable().unique();
    t.uuid('user_id').notNullable().references('users.id').onDelete('CASCADE');
    t.timestamp('expires_at', { useTz: true }).notNullable();
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.timestamp('last_activity_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.string('ip_address', 64).nullable();
    t.text('user_agent').nullable();
    t.string('platform_slug', 50).nullable();
    t.index(['user_id']);
    t.index(['expires_at']);
  });

  await knex.schema.createTable('roles', (t) => {
    t.string('id', 64).primary();
    t.string('name', 100).notNullable().unique();
    t.text('description').nullable();
    t.boolean('is_system').notNullable().defaultTo(false);
    t.boolean('requires_two_factor').notNullable().defaultTo(false);
    t.timestamps(true, true);
  });

  await knex.schema.createTable('permissions', (t) => {
    t.uuid('id').primary().defaultTo(knex.raw('gen_random_uuid()'));
    t.string('resource', 64).notNullable();
    t.string('action', 64).notNullable();
    t.text('description').nullable();
    t.timestamps(true, true);
    t.unique(['resource', 'action']);
  });

  await knex.schema.createTable('role_permissions', (t) => {
    t.string('role_id', 64).notNullable().references('roles.id').onDelete('CASCADE');
    t.uuid('permission_id').notNullable().references('permissions.id').onDelete('CASCADE');
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.primary(['role_id', 'permission_id']);
  });

  await knex.schema.createTable('user_roles', (t) => {
    t.uuid('user_id').notNullable().references('users.id').onDelete('CASCADE');
    t.string('role_id', 64).notNullable().references('roles.id').onDelete('CASCADE');
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.primary(['user_id', 'role_id']);
  });

  await knex.schema.createTable('api_keys', (t) => {
    t.uuid('id').primary().defaultTo(knex.raw('gen_random_uuid()'));
    t.uuid('user_id').nullable().references('users.id').onDelete('CASCADE');
    t.string('name', 100).notNullable();
    t.text('description').nullable();
    t.string('key_hash', 64).notNullable().unique();
    t.string('key_prefix', 16).notNullable();
    t.jsonb('scopes').notNullable().defaultTo('[]');
    t.boolean('is_active').notNullable().defaultTo(true);
    t.boolean('is_system').notNullable().defaultTo(false);
    t.timestamp('expires_at', { useTz: true }).nullable();
    t.timestamp('last_used_at', { useTz: true }).nullable();
    t.timestamps(true, true);
    t.index(['user_id']);
  });

  await knex.schema.createTable('api_key_roles', (t) => {
    t.uuid('api_key_id').notNullable().references('api_keys.id').onDelete('CASCADE');
    t.string('role_id', 64).notNullable().references('roles.id').onDelete('CASCADE');
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.primary(['api_key_id', 'role_id']);
  });

  await knex.schema.createTable('bans', (t) => {
    t.uuid('id').primary().defaultTo(knex.raw('gen_random_uuid()'));
    t.uuid('user_id').notNullable().references('users.id').onDelete('CASCADE');
    t.text('reason').nullable();
    t.uuid('banned_by').nullable();
    t.timestamp('banned_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.timestamp('expires_at', { useTz: true }).nullable();
    t.boolean('is_permanent').notNullable().defaultTo(true);
    t.timestamp('unbanned_at', { useTz: true }).nullable();
    t.uuid('unbanned_by').nullable();
    t.index(['user_id']);
  });

  await knex.schema.createTable('system_config', (t) => {
    t.string('key', 200).primary();
    t.jsonb('value');
    t.text('description').nullable();
    t.timestamp('updated_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
  });

  await knex.schema.createTable('audit_events', (t) => {
    t.uuid('id').primary().defaultTo(knex.raw('gen_random_uuid()'));
    t.string('user_id', 255).nullable();
    t.string('event_type', 64).notNullable();
    t.string('resource_type', 64).nullable();
    t.string('resource_id', 255).nullable();
    t.string('actor_id', 255).nullable();
    t.string('ip_address', 64).nullable();
    t.text('user_agent').nullable();
    t.text('description').nullable();
    t.jsonb('metadata').notNullable().defaultTo('{}');
    t.string('status', 16).notNullable().defaultTo('success');
    t.text('error_message').nullable();
    t.string('country_code', 2).nullable();
    t.string('country_name', 100).nullable();
    t.string('city', 100).nullable();
    t.string('region', 100).nullable();
    t.string('source_service', 32).notNullable().defaultTo('api');
    t.boolean('is_reported').notNullable().defaultTo(false);
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.index(['user_id', 'created_at']);
    t.index(['event_type']);
    t.index(['created_at']);
  });

  await knex.schema.createTable('email_outbox', (t) => {
    t.uuid('id').primary().defaultTo(knex.raw('gen_random_uuid()'));
    t.string('to_address', 320).notNullable();
    t.text('subject').notNullable();
    t.text('text_body').notNullable();
    t.text('html_body').nullable();
    t.string('template', 64).nullable();
    t.uuid('user_id').nullable();
    t.string('status', 16).notNullable().defaultTo('queued');
    t.integer('attempts').notNullable().defaultTo(0);
    t.text('last_error').nullable();
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.timestamp('sent_at', { useTz: true }).nullable();
  });
}

export async function down(knex: Knex): Promise<void> {
  for (const table of [
    'email_outbox',
    'audit_events',
    'system_config',
    'bans',
    'api_key_roles',
    'api_keys',
    'user_roles',
    'role_permissions',
    'permissions',
    'roles',
    'sessions',
  ]) {
    await knex.schema.dropTableIfExists(table);
  }
  await knex.schema.alterTable('users', (t) => t.dropForeign(['primary_platform_account_id']));
  await knex.schema.dropTableIfExists('platform_accounts');
  await knex.schema.dropTableIfExists('users');
  await knex.schema.dropTableIfExists('platforms');
}
