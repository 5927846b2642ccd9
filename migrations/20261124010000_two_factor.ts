import type { Knex } from 'knex';

/**
 * Two-factor authentication (spec §3, §4.15):
 * - `user_two_factor`: one row per user with a TOTP secret, sealed with SECRETS_KEY
 *   (AES-256-GCM, key id stored with the ciphertext). `enabled_at` null with `setup_expires_at`
 *   set is a pending setup; `enabled_at` set is enabled. `last_step` is the newest TOTP time step
 *   accepted, so a code is never accepted twice (also when Redis is unreachable).
 * - `two_factor_backup_codes`: SHA-256 hashes of the backup codes, `used_at` once spent.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('user_two_factor', (t) => {
    t.uuid('user_id').primary().references('users.id').onDelete('CASCADE');
    t.text('secret_encrypted').notNullable();
    t.uuid('platform_id').nullable().references('platforms.id').onDelete('SET NULL');
    t.timestamp('setup_expires_at', { useTz: true }).nullable();
    t.timestamp('enabled_at', { useTz: true }).nullable();
    t.bigInteger('last_step').nullable();
    t.timestamps(true, true);
  });
  await knex.schema.createTable('two_factor_backup_codes', (t) => {
    t.uuid('id').primary().defaultTo(knex.raw('gen_random_uuid()'));
    t.uuid('user_id').notNullable().references('users.id').onDelete('CASCADE');
    t.string('code_hash', 64).notNullable();
    t.timestamp('used_at', { useTz: true }).nullable();
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.index(['user_id']);
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTableIfExists('two_factor_backup_codes');
  await knex.schema.dropTableIfExists('user_two_factor');
}
