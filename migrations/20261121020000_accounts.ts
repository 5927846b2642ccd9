import type { Knex } from 'knex';

/**
 * Accounts: one-time tokens of the email flows (registration, email verification, email change,
 * email link, password reset). Only the sha256 of a token is stored; `payload` carries what the
 * flow applies when the token is used (e.g. the new address, or the argon2 hash of the password
 * chosen at registration). Failed-login counters live in Redis, not here.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('account_tokens', (t) => {
    t.uuid('id').primary().defaultTo(knex.raw('gen_random_uuid()'));
    t.string('token_hash', 64).notNullable().unique();
    t.string('purpose', 32).notNullable();
    // Null only for registrations: the user does not exist until the token is used.
    t.uuid('user_id').nullable().references('users.id').onDelete('CASCADE');
    // The address the mail went to (lowercased), so a pending registration can be found by email.
    t.string('email', 320).nullable();
    t.jsonb('payload').notNullable().defaultTo('{}');
    t.timestamp('expires_at', { useTz: true }).notNullable();
    t.timestamp('used_at', { useTz: true }).nullable();
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.index(['user_id', 'purpose']);
    t.index(['expires_at']);
  });
  await knex.raw(`ALTER TABLE account_tokens ADD CONSTRAINT account_tokens_purpose_check
    CHECK (purpose IN ('registration', 'email_verification', 'email_change', 'email_link', 'password_reset'))`);
  await knex.raw('CREATE INDEX account_tokens_email_purpose ON account_tokens (email, purpose) WHERE used_at IS NULL');
  // The purge job and the ban expiry job scan these.
  await knex.raw(
    'CREATE INDEX users_scheduled_deletion_at ON users (scheduled_deletion_at) WHERE scheduled_deletion_at IS NOT NULL',
  );
  await knex.raw(
    'CREATE INDEX bans_open_expiring ON bans (expires_at) WHERE unbanned_at IS NULL AND expires_at IS NOT NULL',
  );
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('DROP INDEX IF EXISTS bans_open_expiring');
  await knex.raw('DROP INDEX IF EXISTS users_scheduled_deletion_at');
  await knex.schema.dropTableIfExists('account_tokens');
}
