import type { Knex } from 'knex';

/**
 * A keyed row counter (migration 20261126000000_keyed_row_counters) of chat members per guild,
 * `chat_members_by_guild:<guild uuid>`, so a guild's unfiltered member page (GET
 * /v1/chat/guilds/{guild_id}/members, shared/queries/chat.ts) reads its 50 rows over the display
 * order index and its exact total from the counter, instead of a window count over every member of
 * the guild. Also in shared/queries/counters.ts (KEYED_ROW_COUNTERS).
 */
const NAME = 'chat_members_by_guild';
const args = `'${NAME}', 'guild_id'`;

export async function up(knex: Knex): Promise<void> {
  await knex.raw(
    `CREATE TRIGGER ${NAME}_count_ins AFTER INSERT ON chat_members REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION row_counter_delta_by(${args})`,
  );
  await knex.raw(
    `CREATE TRIGGER ${NAME}_count_del AFTER DELETE ON chat_members REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION row_counter_delta_by(${args})`,
  );
  await knex.raw(
    `CREATE TRIGGER ${NAME}_count_upd AFTER UPDATE ON chat_members REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION row_counter_delta_by(${args})`,
  );
  await knex.raw(
    `CREATE TRIGGER ${NAME}_count_trunc AFTER TRUNCATE ON chat_members FOR EACH STATEMENT EXECUTE FUNCTION row_counter_truncate_by('${NAME}')`,
  );
  // The members already there (the table is locked by the triggers' creation above).
  await knex.raw(
    `INSERT INTO row_counters (counter, shard, n)
     SELECT ? || ':' || guild_id::text, 0, count(*) FROM chat_members GROUP BY guild_id`,
    [NAME],
  );
}

export async function down(knex: Knex): Promise<void> {
  for (const suffix of ['ins', 'del', 'upd', 'trunc'])
    await knex.raw(`DROP TRIGGER IF EXISTS ${NAME}_count_${suffix} ON chat_members`);
  await knex.raw(`DELETE FROM row_counters WHERE counter LIKE ? || ':%'`, [NAME]);
}
