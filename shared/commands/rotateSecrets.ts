import type { Knex } from 'knex';
import { decryptSecret, encryptSecret, sealedWith } from '../crypto';
import { transaction } from '../db';
import { ENCRYPTED_COLUMNS, EncryptedColumn } from '../secretColumns';

export interface RotationReport {
  table: string;
  column: string;
  /** Values re-encrypted under the current key. */
  rotated: number;
  /** Values already under the current key. */
  current: number;
}

const BATCH = 500;

/**
 * Re-encrypts every registered sealed column (shared/secretColumns.ts) under the first key of
 * `keys` (SECRETS_KEY), decrypting with any key of the ring (SECRETS_KEY_PREVIOUS). Values already
 * under the current key are left alone, so a rerun after an interruption finishes the job. A row
 * changed meanwhile is not overwritten (the update names the old value). Throws, naming the
 * column, when a value decrypts with no key of the ring.
 */
export async function rotateSecrets(
  db: Knex,
  keys: Buffer[],
  columns: readonly EncryptedColumn[] = ENCRYPTED_COLUMNS,
): Promise<RotationReport[]> {
  const reports: RotationReport[] = [];
  for (const c of columns) {
    const report: RotationReport = { table: c.table, column: c.column, rotated: 0, current: 0 };
    if (!(await db.schema.hasTable(c.table))) continue;
    let after: string | null = null;
    for (;;) {
      const q = db(c.table)
        .whereNotNull(c.column)
        .orderBy(c.key)
        .limit(BATCH)
        .select(`${c.key} as k`, `${c.column} as v`);
      if (after !== null) q.where(c.key, '>', after);
      const rows: Array<{ k: string; v: string }> = await q;
      if (rows.length === 0) break;
      await transaction(db, async (trx) => {
        for (const row of rows) {
          if (sealedWith(row.v, keys[0])) {
            report.current++;
            continue;
          }
          let plain: string;
          try {
            plain = decryptSecret(row.v, keys);
          } catch (err) {
            throw new Error(`${c.table}.${c.column} ${c.key}=${row.k}: ${(err as Error).message}`);
          }
          const n = await trx(c.table)
            .where({ [c.key]: row.k, [c.column]: row.v })
            .update({ [c.column]: encryptSecret(plain, keys) });
          report.rotated += n;
        }
      });
      after = rows[rows.length - 1].k;
    }
    reports.push(report);
  }
  return reports;
}
