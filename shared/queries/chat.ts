import type { Knex } from 'knex';
import { ChatChannel } from '../models/ChatChannel';
import { ChatGuild } from '../models/ChatGuild';
import { ChatMember } from '../models/ChatMember';
import { CAPPED_TOTAL, keyedCounterSql, readCappedPage } from './counters';
import {
  compiledOnce,
  computeOncePerTurn,
  rowBy,
  rowsBy,
  sharedPerTurn,
  turnBatcherByDb,
  withoutColumns,
} from '../rowLoader';
import { byName } from './byName';

/** Read-only lookups of the chat bot's synced data (spec §4.23). */

/** A synced guild by its snowflake. */
export async function guildBySnowflake(db: Knex, guildId: string): Promise<ChatGuild | undefined> {
  // Outside a transaction: the batched unique-key read (guild_id is unique).
  if (!(db as Knex.Transaction).isTransaction) return rowBy(ChatGuild, 'guild_id', db).load(guildId);
  return ChatGuild.query(db).findOne({ guild_id: guildId });
}

/** Every synced guild, by name. */
export async function listGuilds(db: Knex): Promise<ChatGuild[]> {
  return guildsInTurn(db);
}

/** The guild list, read once per turn for every request asking. */
const guildsInTurn = sharedPerTurn(async (db): Promise<ChatGuild[]> =>
  ChatGuild.query(db).orderByRaw(byName(undefined, 'guild_id')),
);

/** A guild's channels in the platform's order: position, then id. */
export async function guildChannels(db: Knex, guildUuid: string): Promise<ChatChannel[]> {
  return rowsBy(
    ChatChannel,
    'guild_id',
    [
      ['position', 'asc'],
      ['channel_id', 'asc'],
    ],
    db,
  ).load(guildUuid);
}

export interface MemberFilter {
  search?: string;
  botOnly?: boolean;
  humansOnly?: boolean;
  hasRole?: string;
  limit: number;
  offset: number;
}

const likeEscape = (s: string) => s.replace(/[\\%_]/g, (c) => `\\${c}`);

/**
 * Filtered member lists count their matches up to this many; beyond it the total is the planner's
 * estimate (the route flags it with X-Total-Count-Estimated), so page 1 of a filter that most of a
 * large guild passes reads its page, not every match.
 */
export const MEMBER_COUNT_CAP = 10_000;

/**
 * A guild's members passing a filter (no order, no page): search (case-insensitive substring of
 * username, global name or nickname), bots or humans only, holders of a role. The search compares
 * `lower(col) LIKE lower(pattern)`, the expressions of the trigram indexes of migration
 * 20261206000100_chat_member_search, so its matches come from a bitmap OR of those indexes; any
 * other form of it (ILIKE, lower() on one side only) matches no index and reads the whole guild.
 */
function applyFilter(q: Knex.QueryBuilder, guildUuid: string, f: MemberFilter): Knex.QueryBuilder {
  q.where('guild_id', guildUuid);
  if (f.search) {
    const pattern = `%${likeEscape(f.search)}%`;
    q.whereRaw('(lower(username) LIKE lower(?) OR lower(global_name) LIKE lower(?) OR lower(nickname) LIKE lower(?))', [
      pattern,
      pattern,
      pattern,
    ]);
  }
  if (f.botOnly) q.where('bot', true);
  if (f.humansOnly) q.where('bot', false);
  if (f.hasRole) q.whereRaw('roles @> ARRAY[?]::text[]', [f.hasRole]);
  return q;
}

/** A page of members, as read: shared by the callers of one turn that ask for the same page. */
export interface MemberPage {
  readonly members: readonly ChatMember[];
  /** The members passing the filter: exact, unless `estimated`. */
  readonly total: number;
  /** The total is the planner's estimate: a filter matched more than MEMBER_COUNT_CAP members. */
  readonly estimated: boolean;
  /** Whether members lie beyond this page (exact, whatever the total). */
  readonly hasMore: boolean;
  /** When it was read (ms): presenters that depend on the time use this, so the page's callers agree. */
  readonly at: number;
}

const TOTAL_COLUMN: ReadonlySet<string> = new Set(['total_count']);
const CAPPED_COLUMN: ReadonlySet<string> = new Set([CAPPED_TOTAL]);

const unfiltered = (f: MemberFilter) => !f.search && !f.botOnly && !f.humansOnly && !f.hasRole;

/**
 * The page and its total in one statement. Without a filter the total is the guild's keyed row
 * counter (a scalar subquery, same snapshot), so the page reads its rows over the display order
 * index and stops at the limit. With one, it is a count of at most MEMBER_COUNT_CAP + 1 matches
 * (also a scalar subquery); a window count over the matches (`count(*) OVER ()`) read every one
 * of them before the first page (113 ms for humans_only at 100,000 members, 4.5 ms capped).
 */
const DISPLAY_ORDER = 'lower(coalesce(nickname, global_name, username)), user_id';
/** The unfiltered page as fixed text (the usual read): nothing to build or compile per read. */
const UNFILTERED_PAGE = `SELECT chat_members.*, ${keyedCounterSql('chat_members_by_guild', '?::text')} AS total_count
   FROM chat_members WHERE guild_id = ?::uuid ORDER BY ${DISPLAY_ORDER} LIMIT ?::int OFFSET ?::int`;

async function readMembers(db: Knex, guildUuid: string, f: MemberFilter): Promise<MemberPage> {
  const guild = guildUuid.toLowerCase();
  if (unfiltered(f)) {
    const found = (
      await db.raw<{ rows: Array<Record<string, unknown>> }>(UNFILTERED_PAGE, [guild, guild, f.limit, f.offset])
    ).rows;
    let total = found.length ? Number(found[0]!.total_count) : 0;
    if (!found.length && f.offset > 0) {
      // Past the end there is no row to carry the total: read the counter on its own.
      const { rows } = await db.raw<{ rows: Array<{ n: string }> }>(
        `SELECT ${keyedCounterSql('chat_members_by_guild', '?::text')} AS n`,
        [guild],
      );
      total = Number(rows[0].n);
    }
    const members = found.map((r) => ChatMember.fromDatabaseJson(withoutColumns(r, TOTAL_COLUMN)));
    return { members, total, estimated: false, hasMore: f.offset + members.length < total, at: Date.now() };
  }
  const matching = () => applyFilter(db('chat_members'), guildUuid, f);
  // Counted up to the cap, then estimated; one row past the page says whether there are more,
  // exactly, and makes the last page's total exact (readCappedPage).
  const read = await readCappedPage(
    db,
    matching,
    { limit: f.limit, offset: f.offset },
    MEMBER_COUNT_CAP,
    (count, limit) =>
      matching().select('chat_members.*', count).orderByRaw(DISPLAY_ORDER).limit(limit).offset(f.offset) as Promise<
        Array<Record<string, unknown>>
      >,
  );
  const members = read.rows.map((r) => ChatMember.fromDatabaseJson(withoutColumns(r, CAPPED_COLUMN)));
  const { total, estimated, hasMore } = read;
  return { members, total, estimated, hasMore, at: Date.now() };
}

/** Identical member pages asked for in one turn: one read, built once (computeOncePerTurn). */
const memberPagesInTurn = computeOncePerTurn<MemberPage>();

/**
 * A page of a guild's members and the filter's total (exact up to MEMBER_COUNT_CAP matches, then
 * estimated, see readMembers). The callers of one turn asking for the
 * same page share it (statement, models and all): present it, do not change it.
 */
export async function searchMembers(db: Knex, guildUuid: string, f: MemberFilter): Promise<MemberPage> {
  if ((db as Knex.Transaction).isTransaction) return readMembers(db, guildUuid, f);
  const key = `${guildUuid.toLowerCase()}\n${JSON.stringify([f.search, f.botOnly, f.humansOnly, f.hasRole, f.limit, f.offset])}`;
  return memberPagesInTurn(db, key, () => readMembers(db, guildUuid, f));
}

/** One member of a guild by the user's snowflake. */
export async function guildMember(db: Knex, guildUuid: string, userId: string): Promise<ChatMember | undefined> {
  return membersInTurn(db, `${guildUuid.toLowerCase()} ${userId}`);
}

/** The members asked for in one turn, by (guild uuid, user snowflake) pairs: one statement. */
const membersByPairSql = compiledOnce((db) =>
  db('chat_members')
    .select('chat_members.*')
    .whereRaw('(guild_id, user_id) IN (SELECT * FROM unnest(?::uuid[], ?::text[]))', [[], []]),
);
const membersInTurn = turnBatcherByDb(async (db, pairs) => {
  const split = pairs.map((p) => p.split(' '));
  const { rows } = await db.raw<{ rows: Array<Record<string, unknown>> }>(membersByPairSql(db), [
    split.map(([g]) => g),
    split.map(([, u]) => u),
  ]);
  const members = rows.map((r) => ChatMember.fromDatabaseJson(r) as ChatMember);
  return new Map(members.map((m) => [`${m.guild_id} ${m.user_id}`, m]));
});
