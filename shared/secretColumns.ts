/**
 * Every database column holding a value sealed with `encryptSecret` (shared/crypto.ts). A feature
 * that stores a new sealed column adds it here, so `npm run cli -- rotate-secrets` re-encrypts it
 * under the current SECRETS_KEY (docs/two-factor.md, "Secrets at rest"), and opens it wherever it
 * is read with the whole key ring (`config.secretKeys`), so values sealed with SECRETS_KEY_PREVIOUS
 * keep working until the rotation reaches them. test/shared/secretColumns.test.ts fails for a sealed
 * column missing here.
 */
export interface EncryptedColumn {
  table: string;
  column: string;
  /** The primary-key column that identifies a row. */
  key: string;
}

export const ENCRYPTED_COLUMNS: readonly EncryptedColumn[] = [
  /** The one-time token of a mail not yet sent (emails/outbox.ts). */
  { table: 'email_outbox', column: 'token_sealed', key: 'id' },
  /** TOTP secrets (commands/twoFactor.ts). */
  { table: 'user_two_factor', column: 'secret_encrypted', key: 'user_id' },
  /** Stream-platform tokens (commands/integrationTokens.ts). */
  { table: 'integrations', column: 'access_token_sealed', key: 'id' },
  { table: 'integrations', column: 'refresh_token_sealed', key: 'id' },
];
