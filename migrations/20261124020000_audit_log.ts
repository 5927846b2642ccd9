import type { Knex } from 'knex';

/**
 * Audit and activity log (spec §4.24): user reports of events, the indexes that keep a filtered
 * and sorted page fast at millions of events, and the retention entry of system_config.
 *
 * Every list index ends in (created_at, id) so that "newest first" (the default sort, with id as
 * the tie-breaker) is read straight off the index for each filter and each sort field, backwards
 * for desc. The foundation's single-column (event_type) and (created_at) indexes are replaced.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('audit_reports', (t) => {
    t.uuid('id').primary().defaultTo(knex.raw('gen_random_uuid()'));
    t.uuid('audit_event_id').notNullable().references('audit_events.id').onDelete('CASCADE');
    t.uuid('user_id').notNullable().references('users.id').onDelete('CASCADE');
    t.string('reason', 32).notNullable();
    t.text('description').nullable();
    t.string('status', 16).notNullable().defaultTo('pending');
    t.uuid('reviewed_by').nullable();
    t.timestamp('reviewed_at', { useTz: true }).nullable();
    t.text('resolution_notes').nullable();
    t.timestamps(true, true);
    // One report per event (409 on the second).
    t.unique(['audit_event_id']);
    t.index(['user_id', 'created_at']);
    t.index(['status', 'created_at']);
  });
  await knex.raw(`ALTER TABLE audit_reports ADD CONSTRAINT audit_reports_reason_check
    CHECK (reason IN ('not_me', 'suspicious', 'unknown_device', 'unknown_location', 'other'))`);
  await knex.raw(`ALTER TABLE audit_reports ADD CONSTRAINT audit_reports_status_check
    CHECK (status IN ('pending', 'reviewed', 'resolved', 'dismissed'))`);

  await knex.raw('DROP INDEX IF EXISTS audit_events_event_type_index');
  await knex.raw('DROP INDEX IF EXISTS audit_events_created_at_index');
  await knex.raw('DROP INDEX IF EXISTS audit_events_user_id_created_at_index');
  await knex.raw('CREATE INDEX audit_events_created ON audit_events (created_at, id)');
  await knex.raw('CREATE INDEX audit_events_user_created ON audit_events (user_id, created_at, id)');
  await knex.raw('CREATE INDEX audit_events_type_created ON audit_events (event_type, created_at, id)');
  await knex.raw('CREATE INDEX audit_events_status_created ON audit_events (status, created_at, id)');
  await knex.raw('CREATE INDEX audit_events_source_created ON audit_events (source_service, created_at, id)');
  await knex.raw('CREATE INDEX audit_events_resource_created ON audit_events (resource_type, created_at, id)');
  await knex.raw('CREATE INDEX audit_events_reported_created ON audit_events (created_at, id) WHERE is_reported');

  // user_search matches usernames and emails by substring: trigram indexes serve that when the
  // pg_trgm extension (trusted, shipped with PostgreSQL's contrib) can be created; without them the
  // search scans users and platform_accounts, which is fine for tens of thousands of users.
  await knex.raw(`DO $$ BEGIN
    IF EXISTS (SELECT 1 FROM pg_available_extensions WHERE name = 'pg_trgm') THEN
      BEGIN
        CREATE EXTENSION IF NOT EXISTS pg_trgm;
      EXCEPTION WHEN insufficient_privilege THEN
        RAISE NOTICE 'pg_trgm not created: user_search scans users';
      END;
    END IF;
    IF EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'pg_trgm') THEN
      CREATE INDEX IF NOT EXISTS users_username_trgm ON users USING gin (lower(username) gin_trgm_ops);
      CREATE INDEX IF NOT EXISTS platform_accounts_email_trgm ON platform_accounts USING gin (lower(email) gin_trgm_ops);
    END IF;
  END $$`);

  await knex('system_config')
    .insert({
      key: 'audit.retention_days',
      value: JSON.stringify(365),
      description: 'Days audit events are kept (older ones are deleted in batches); 0 or null keeps all',
    })
    .onConflict('key')
    .ignore();
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTableIfExists('audit_reports');
  for (const name of ['created', 'user_created', 'type_created', 'status_created', 'source_created'])
    await knex.raw(`DROP INDEX IF EXISTS audit_events_${name}`);
  await knex.raw('DROP INDEX IF EXISTS audit_events_resource_created');
  await knex.raw('DROP INDEX IF EXISTS audit_events_reported_created');
  await knex.raw('DROP INDEX IF EXISTS users_username_trgm');
  await knex.raw('DROP INDEX IF EXISTS platform_accounts_email_trgm');
  await knex.raw('CREATE INDEX audit_events_user_id_created_at_index ON audit_events (user_id, created_at)');
  await knex.raw('CREATE INDEX audit_events_event_type_index ON audit_events (event_type)');
  await knex.raw('CREATE INDEX audit_events_created_at_index ON audit_events (created_at)');
  await knex('system_config').where('key', 'audit.retention_days').delete();
}
