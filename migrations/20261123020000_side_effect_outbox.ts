import type { Knex } from 'knex';

/**
 * Transactional outbox of side effects that must not be lost (shared/outbox.ts): a row is written
 * in the same transaction (or statement) as the data it is about, and a relay carries it out on
 * Redis/BullMQ and deletes it. Rows live for milliseconds, so the table churns: vacuum it after a
 * fixed number of dead rows rather than a fraction of a table that is nearly always empty.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('side_effect_outbox', (t) => {
    // The relay works in id order, which is the order the rows were written.
    t.bigIncrements('id').primary();
    t.string('kind', 32).notNullable();
    t.jsonb('payload').notNullable();
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
  });
  await knex.raw(
    'ALTER TABLE side_effect_outbox SET (autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 5000)',
  );
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTableIfExists('side_effect_outbox');
}
