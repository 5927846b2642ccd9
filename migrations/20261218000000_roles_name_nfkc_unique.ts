import type { Knex } from 'knex';

/**
 * Role names are one name when they are equal in NFKC and lower case, not only in lower case:
 * full-width `Ａｄｍｉｎ` (and any other compatibility form: ligatures, superscripts, the Kelvin
 * sign) was a second `Admin` beside the system role. The unique index compares what POST and PATCH
 * /v1/roles compare (shared/commands/roles.ts nameTaken), so concurrent requests for variants of
 * one name still make one role; it replaces the index on `lower(name)`, which it implies.
 * PostgreSQL's normalize() needs a UTF8 database, as the service does.
 */
export async function up(knex: Knex): Promise<void> {
  const { rows } = await knex.raw<{ rows: Array<{ names: string }> }>(
    `SELECT string_agg(name, ', ' ORDER BY name) AS names FROM roles
      GROUP BY lower(normalize(name, NFKC)) HAVING count(*) > 1`,
  );
  if (rows.length)
    throw new Error(
      `roles whose names differ only in case or compatibility form must be renamed before this migration: ${rows.map((r) => r.names).join('; ')}`,
    );
  await knex.raw('CREATE UNIQUE INDEX roles_name_nfkc_unique ON roles (lower(normalize(name, NFKC)))');
  await knex.raw('DROP INDEX roles_name_lower_unique');
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('CREATE UNIQUE INDEX roles_name_lower_unique ON roles (lower(name))');
  await knex.raw('DROP INDEX roles_name_nfkc_unique');
}
