import type { Knex } from 'knex';

/**
 * Role names are unique regardless of case (POST and PATCH /v1/roles answer 409 for `Admins` when
 * `admins` exists). That rule was a read before the write: a scan of every role (no index serves
 * `lower(name)`), and two concurrent requests could both pass it. A unique index on `lower(name)`
 * makes the check an index probe and the rule atomic: the loser of a race gets the index's 409.
 */
export async function up(knex: Knex): Promise<void> {
  const { rows } = await knex.raw<{ rows: Array<{ names: string }> }>(
    `SELECT string_agg(name, ', ' ORDER BY name) AS names FROM roles GROUP BY lower(name) HAVING count(*) > 1`,
  );
  if (rows.length)
    throw new Error(
      `roles whose names differ only in case must be renamed before this migration: ${rows.map((r) => r.names).join('; ')}`,
    );
  await knex.raw('CREATE UNIQUE INDEX roles_name_lower_unique ON roles (lower(name))');
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('DROP INDEX IF EXISTS roles_name_lower_unique');
}
