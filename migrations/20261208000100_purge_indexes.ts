import type { Knex } from 'knex';
import { dropInvalid } from './20261128000200_trip_track_covering_index';

/**
 * The user purge (shared/commands/userLifecycle.ts) deletes the user's mail by
 * `user_id = ? OR lower(to_address) IN (…)` and their one-time tokens by `email IN (…)`. Neither
 * had an index it could use (account_tokens' index on email is partial on unused tokens), so every
 * purge, run once per user by the scheduled task, read the whole mail history and token table.
 * With these, each side is an index probe (a bitmap OR for the mail). Built CONCURRENTLY: mail is
 * written by most account flows.
 */
export const config = { transaction: false };

const INDEXES: ReadonlyArray<readonly [string, string]> = [
  ['email_outbox_user_id_index', 'email_outbox (user_id) WHERE user_id IS NOT NULL'],
  ['email_outbox_to_address_lower_index', 'email_outbox (lower(to_address))'],
  ['account_tokens_email_index', 'account_tokens (email) WHERE email IS NOT NULL'],
];

export async function up(knex: Knex): Promise<void> {
  for (const [name, on] of INDEXES) {
    await dropInvalid(knex, name);
    await knex.raw(`CREATE INDEX CONCURRENTLY IF NOT EXISTS ${name} ON ${on}`);
  }
}

export async function down(knex: Knex): Promise<void> {
  for (const [name] of INDEXES) await knex.raw(`DROP INDEX CONCURRENTLY IF EXISTS ${name}`);
}
