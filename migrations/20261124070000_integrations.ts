import type { Knex } from 'knex';

/**
 * Stream-platform integrations (spec §2 Integration, §4.25): one row per user and platform account.
 * Access and refresh tokens are stored only sealed with SECRETS_KEY (shared/crypto.ts); a
 * disconnected integration is deleted, one whose refresh token the platform refused is kept
 * inactive until the user connects again.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('integrations', (t) => {
    t.uuid('id').primary().defaultTo(knex.raw('gen_random_uuid()'));
    t.uuid('user_id').notNullable().references('users.id').onDelete('CASCADE');
    t.string('platform_slug', 64).notNullable();
    t.string('platform_user_id', 255).notNullable();
    t.string('username', 255).notNullable();
    t.string('display_name', 255).nullable();
    t.text('profile_image_url').nullable();
    t.jsonb('scopes').notNullable().defaultTo('[]');
    t.text('access_token_sealed').notNullable();
    t.text('refresh_token_sealed').nullable();
    t.timestamp('token_expires_at', { useTz: true }).nullable();
    t.boolean('is_active').notNullable().defaultTo(true);
    t.string('bot_status', 16).notNullable().defaultTo('active');
    t.timestamp('connected_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.timestamp('last_refreshed_at', { useTz: true }).nullable();
    t.timestamps(true, true);
    t.unique(['user_id', 'platform_slug', 'platform_user_id']);
    t.index(['user_id', 'platform_slug']);
  });
  await knex.raw(
    "ALTER TABLE integrations ADD CONSTRAINT integrations_bot_status_check CHECK (bot_status IN ('active', 'paused', 'disabled'))",
  );
  // The scheduled refresh reads the active integrations nearest to expiry.
  await knex.raw(
    'CREATE INDEX integrations_refresh_due_idx ON integrations (token_expires_at) WHERE is_active AND refresh_token_sealed IS NOT NULL',
  );
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTableIfExists('integrations');
}
