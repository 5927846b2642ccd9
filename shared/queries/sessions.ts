import type { Knex } from 'knex';
import { sha256 } from '../crypto';
import { Session } from '../models/Session';
import { compiledOnce, groupBy, rowBy, turnBatcherByDb, withoutColumns } from '../rowLoader';

/** A live session by its raw token (outside a transaction: the batched unique-key read). */
export async function findSessionByToken(db: Knex, token: string): Promise<Session | undefined> {
  if ((db as Knex.Transaction).isTransaction)
    return Session.query(db)
      .findOne({ token_hash: sha256(token) })
      .where('expires_at', '>', new Date());
  const session = await rowBy(Session, 'token_hash', db).load(sha256(token));
  return session && new Date(session.expires_at).getTime() > Date.now() ? session : undefined;
}

/** A session by its raw token, expired or not (logout of a session that ran out still works); batched. */
export async function findAnySessionByToken(db: Knex, token: string): Promise<Session | undefined> {
  return rowBy(Session, 'token_hash', db).load(sha256(token));
}

/**
 * A user's unexpired sessions, most recently active first, with the display names of the platforms
 * they signed in with (by slug), in one statement.
 */
export async function liveUserSessions(
  db: Knex,
  userId: string,
): Promise<{ sessions: Session[]; platformNames: Map<string, string> }> {
  const rows = (await liveSessionsInTurn(db, userId)) ?? [];
  const platformNames = new Map<string, string>();
  const sessions = rows.map(({ session, platformName }) => {
    if (session.platform_slug && platformName != null) platformNames.set(session.platform_slug, platformName);
    return session;
  });
  return { sessions, platformNames };
}

/** The live sessions of every user asked for in one turn, with their platform's name: one statement. */
const liveSessionsSql = compiledOnce((db) =>
  db('sessions')
    .leftJoin('platforms as p', 'p.slug', 'sessions.platform_slug')
    .whereRaw('sessions.user_id = ANY(?)', [[]])
    .where('sessions.expires_at', '>', new Date(0))
    .orderBy('sessions.last_activity_at', 'desc')
    .orderBy('sessions.id')
    .select('sessions.*', 'p.name as _platform_name'),
);
const PLATFORM_NAME: ReadonlySet<string> = new Set(['_platform_name']);
const liveSessionsInTurn = turnBatcherByDb(async (db, userIds) => {
  const { rows } = await db.raw<{ rows: Array<Record<string, unknown> & { _platform_name: string | null }> }>(
    liveSessionsSql(db),
    [userIds, new Date()],
  );
  return groupBy(
    rows,
    (r) => String(r.user_id),
    (r) => ({
      session: Session.fromDatabaseJson(withoutColumns(r, PLATFORM_NAME)) as Session,
      platformName: r._platform_name ?? null,
    }),
  );
});
