import type { Knex } from 'knex';

/**
 * An authorization code remembers which grant of the consent it was issued under (the consent's
 * granted_at, read under the consent's row lock by the authorize that wrote it). The exchange
 * compares the two exactly: a code of a grant that was revoked, then granted again, belongs to the
 * revoked grant and is refused, even when the revocation could not mark it used (an exchange held
 * it and rolled back). Null for codes issued before this column: they expire within minutes.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw('ALTER TABLE oauth_authorization_codes ADD COLUMN IF NOT EXISTS consent_granted_at timestamptz');
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('ALTER TABLE oauth_authorization_codes DROP COLUMN IF EXISTS consent_granted_at');
}
