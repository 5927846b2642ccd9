import type { Knex } from 'knex';

/**
 * A used one-time token keeps no payload (shared/commands/accountTokens.ts, claimAccountToken): the
 * claim empties it. Tokens used before kept theirs until a day past expiry: a registration's or an
 * email link's argon2 password hash, the username chosen at registration. Emptied here.
 */
export async function up(knex: Knex): Promise<void> {
  await knex('account_tokens')
    .whereNotNull('used_at')
    .whereRaw("payload <> '{}'::jsonb")
    .update({ payload: knex.raw("'{}'::jsonb") });
}

/** What was emptied is not kept anywhere: nothing to put back. */
export async function down(): Promise<void> {}
