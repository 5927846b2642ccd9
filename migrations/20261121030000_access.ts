import type { Knex } from 'knex';

/**
 * OAuth 2.0 provider tables: client applications, authorization codes, access and refresh tokens
 * (with their rotation chain) and consents. Every secret or token is stored as its SHA-256 hash.
 * api_keys, api_key_roles, roles, permissions and role_permissions come from the foundation.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('oauth_clients', (t) => {
    t.uuid('id').primary().defaultTo(knex.raw('gen_random_uuid()'));
    // Owner; null only for clients created by a credential without a user (then admins manage it).
    t.uuid('user_id').nullable().references('users.id').onDelete('CASCADE');
    t.string('name', 100).notNullable();
    t.text('description').nullable();
    t.text('logo_url').nullable();
    t.text('homepage_url').nullable();
    t.text('privacy_policy_url').nullable();
    t.text('terms_of_service_url').nullable();
    t.string('client_secret_hash', 64).nullable();
    t.jsonb('redirect_uris').notNullable().defaultTo('[]');
    t.jsonb('allowed_scopes').notNullable().defaultTo('[]');
    t.string('client_type', 16).notNullable().defaultTo('confidential');
    t.boolean('is_active').notNullable().defaultTo(true);
    t.boolean('is_first_party').notNullable().defaultTo(false);
    t.timestamps(true, true);
    t.index(['user_id']);
  });
  await knex.raw(
    `ALTER TABLE oauth_clients ADD CONSTRAINT oauth_clients_type_check CHECK (client_type IN ('public', 'confidential'))`,
  );

  await knex.schema.createTable('oauth_authorization_codes', (t) => {
    t.uuid('id').primary().defaultTo(knex.raw('gen_random_uuid()'));
    t.string('code_hash', 64).notNullable().unique();
    t.uuid('client_id').notNullable().references('oauth_clients.id').onDelete('CASCADE');
    t.uuid('user_id').notNullable().references('users.id').onDelete('CASCADE');
    t.text('redirect_uri').notNullable();
    t.jsonb('scopes').notNullable().defaultTo('[]');
    t.string('code_challenge', 128).notNullable();
    t.string('code_challenge_method', 8).notNullable().defaultTo('S256');
    t.timestamp('expires_at', { useTz: true }).notNullable();
    t.timestamp('used_at', { useTz: true }).nullable();
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.index(['client_id', 'user_id']);
    t.index(['expires_at']);
  });

  await knex.schema.createTable('oauth_refresh_tokens', (t) => {
    t.uuid('id').primary().defaultTo(knex.raw('gen_random_uuid()'));
    t.string('token_hash', 64).notNullable().unique();
    t.uuid('client_id').notNullable().references('oauth_clients.id').onDelete('CASCADE');
    t.uuid('user_id').notNullable().references('users.id').onDelete('CASCADE');
    t.jsonb('scopes').notNullable().defaultTo('[]');
    // Every token descending from one authorization code shares a family: reuse of a rotated
    // token revokes the whole family.
    t.uuid('family_id').notNullable();
    t.uuid('authorization_code_id').nullable().references('oauth_authorization_codes.id').onDelete('SET NULL');
    t.uuid('parent_id').nullable().references('oauth_refresh_tokens.id').onDelete('SET NULL');
    t.uuid('replaced_by_id').nullable().references('oauth_refresh_tokens.id').onDelete('SET NULL');
    t.timestamp('expires_at', { useTz: true }).notNullable();
    t.timestamp('rotated_at', { useTz: true }).nullable();
    t.timestamp('revoked_at', { useTz: true }).nullable();
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.index(['family_id']);
    t.index(['user_id', 'client_id']);
  });

  await knex.schema.createTable('oauth_access_tokens', (t) => {
    t.uuid('id').primary().defaultTo(knex.raw('gen_random_uuid()'));
    t.string('token_hash', 64).notNullable().unique();
    t.uuid('client_id').notNullable().references('oauth_clients.id').onDelete('CASCADE');
    t.uuid('user_id').notNullable().references('users.id').onDelete('CASCADE');
    t.jsonb('scopes').notNullable().defaultTo('[]');
    t.uuid('family_id').notNullable();
    t.uuid('refresh_token_id').nullable().references('oauth_refresh_tokens.id').onDelete('SET NULL');
    t.timestamp('expires_at', { useTz: true }).notNullable();
    t.timestamp('revoked_at', { useTz: true }).nullable();
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.index(['family_id']);
    t.index(['user_id', 'client_id']);
    t.index(['expires_at']);
  });

  await knex.schema.createTable('oauth_consents', (t) => {
    t.uuid('id').primary().defaultTo(knex.raw('gen_random_uuid()'));
    t.uuid('user_id').notNullable().references('users.id').onDelete('CASCADE');
    t.uuid('client_id').notNullable().references('oauth_clients.id').onDelete('CASCADE');
    t.jsonb('scopes').notNullable().defaultTo('[]');
    t.timestamp('granted_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.timestamp('updated_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.timestamp('revoked_at', { useTz: true }).nullable();
    t.unique(['user_id', 'client_id']);
    t.index(['client_id']);
  });
}

export async function down(knex: Knex): Promise<void> {
  for (const table of [
    'oauth_consents',
    'oauth_access_tokens',
    'oauth_refresh_tokens',
    'oauth_authorization_codes',
    'oauth_clients',
  ]) {
    await knex.schema.dropTableIfExists(table);
  }
}
