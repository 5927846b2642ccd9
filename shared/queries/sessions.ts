import type { Knex } from 'knex';
import { sha256 } from '../crypto';
import { Platform } from '../models/Platform';
import { Session } from '../models/Session';

/** A live session by its raw token. */
export async function findSessionByToken(db: Knex, token: string): Promise<Session | undefined> {
  return Session.query(db)
    .findOne({ token_hash: sha256(token) })
    .where('expires_at', '>', new Date());
}

/** A session by its raw token, expired or not (logout of a session that ran out still works). */
export async function findAnySessionByToken(db: Knex, token: string): Promise<Session | undefined> {
  return Session.query(db).findOne({ token_hash: sha256(token) });
}

/** A user's unexpired sessions, most recently active first. */
export async function liveUserSessions(db: Knex, userId: string): Promise<Session[]> {
  return Session.query(db)
    .where('user_id', userId)
    .where('expires_at', '>', new Date())
    .orderBy('last_activity_at', 'desc')
    .orderBy('id');
}

/** Display names of the platforms by slug (a session names the platform it signed in with). */
export async function platformNames(db: Knex): Promise<Map<string, string>> {
  const platforms = await Platform.query(db).select('slug', 'name');
  return new Map(platforms.map((p) => [p.slug, p.name]));
}
