import type { Knex } from 'knex';
import type { Model } from 'objection';
import { Ban } from '../models/Ban';
import { Platform } from '../models/Platform';
import { PlatformAccount } from '../models/PlatformAccount';
import { User } from '../models/User';
import { normaliseEmail } from '../domain/accounts';
import { DisplayedAccount, FlatUser, presentFlatUser } from '../presenters/user';
import { compiledOnce, groupBy, rowsBy, turnBatcherByDb, withoutColumns } from '../rowLoader';
import { isUuid } from '../zod';

/** Whether a username is taken (case-insensitively), optionally ignoring one user. */
export async function usernameTaken(db: Knex, username: string, exceptUserId?: string): Promise<boolean> {
  const q = db('users').whereRaw('lower(username) = lower(?)', [username]);
  if (exceptUserId) q.whereNot('id', exceptUserId);
  return !!(await q.first('id'));
}

/** The platform by id or slug. */
export async function findPlatform(db: Knex, idOrSlug: string): Promise<Platform | undefined> {
  return Platform.query(db)
    .where((q) => (isUuid(idOrSlug) ? q.where('id', idOrSlug).orWhere('slug', idOrSlug) : q.where('slug', idOrSlug)))
    .first();
}

/** The email/password platform (slug `email`). */
export async function emailPlatform(db: Knex): Promise<Platform> {
  const p = await Platform.query(db).findOne({ slug: 'email' });
  if (!p) throw new Error('the email platform is missing: run the seed');
  return p;
}

/** The user's email/password account, if they have one. */
export async function findEmailAccount(db: Knex, userId: string): Promise<PlatformAccount | undefined> {
  return PlatformAccount.query(db)
    .joinRelated('platform')
    .where('platform.slug', 'email')
    .where('platform_accounts.user_id', userId)
    .select('platform_accounts.*')
    .first();
}

/** The email/password account with this address (live users only), for sign-in. */
export async function findEmailAccountByAddress(db: Knex, email: string): Promise<PlatformAccount | undefined> {
  return PlatformAccount.query(db)
    .joinRelated('platform')
    .join('users', 'users.id', 'platform_accounts.user_id')
    .where('platform.slug', 'email')
    .whereRaw('lower(platform_accounts.email) = ?', [normaliseEmail(email)])
    .whereNull('users.deleted_at')
    .select('platform_accounts.*')
    .first();
}

/**
 * Whether an email/password sign-in with this address exists, also one of a user deleted but not
 * yet purged (it keeps the address until then, so it can be restored): a new account cannot take it.
 */
export async function emailSignInExists(db: Knex, email: string): Promise<boolean> {
  return !!(await db('platform_accounts')
    .join('platforms', 'platforms.id', 'platform_accounts.platform_id')
    .where('platforms.slug', 'email')
    .whereRaw('lower(platform_accounts.email) = ?', [normaliseEmail(email)])
    .first('platform_accounts.id'));
}

/**
 * The live user an address belongs to: the owner of an email/password account with it first,
 * then verified, primary and older accounts. With `verifiedOnly` only addresses proven by a
 * verification mail or supplied by a sign-in provider count: what linking by email relies on, so
 * an address a user merely typed into a profile never pulls someone else's sign-in into their account.
 */
export async function findUserIdByEmail(
  db: Knex,
  email: string,
  opts: { exceptUserId?: string; verifiedOnly?: boolean } = {},
): Promise<string | undefined> {
  return (await userIdByEmailQuery(db, email, opts))?.user_id;
}

/** findUserIdByEmail as a query builder (`.first('pa.user_id')`), to use as a subquery. */
function userIdByEmailQuery(db: Knex, email: string, opts: { exceptUserId?: string; verifiedOnly?: boolean } = {}) {
  const q = db('platform_accounts as pa')
    .join('users as u', 'u.id', 'pa.user_id')
    .join('platforms as p', 'p.id', 'pa.platform_id')
    .whereRaw('lower(pa.email) = ?', [normaliseEmail(email)])
    .whereNull('u.deleted_at')
    .orderByRaw(
      "(p.slug = 'email') desc, (pa.email_verified_at is not null) desc, pa.is_primary desc, pa.created_at asc",
    )
    .first('pa.user_id');
  if (opts.exceptUserId) q.whereNot('pa.user_id', opts.exceptUserId);
  if (opts.verifiedOnly) q.whereNotNull('pa.email_verified_at');
  return q;
}

/**
 * Serialises, until the transaction ends, the writes that give an address to an account: a new
 * verified account (registration, a first provider sign-in), an email change, an email link. Each
 * takes this lock before it checks that no other live user holds the address, so two of them at
 * once cannot both see it free (read committed reads what committed before each statement; the
 * second one's check runs after the first has committed). Key space 1 of the two-key advisory locks.
 */
export async function lockEmailAddress(trx: Knex.Transaction, email: string): Promise<void> {
  await trx.raw('SELECT pg_advisory_xact_lock(1, hashtext(?))', [normaliseEmail(email)]);
}

/**
 * The same for one provider account (a platform and the provider's user id): concurrent first
 * sign-ins of it create one user, and the others find it. Key space 2; taken before the address lock.
 */
export async function lockProviderAccount(
  trx: Knex.Transaction,
  platformId: string,
  providerId: string,
): Promise<void> {
  await trx.raw('SELECT pg_advisory_xact_lock(2, hashtext(?))', [`${platformId}:${providerId}`]);
}

/** Whether an address is used by any platform account of another live user (verified or not). */
export async function emailInUse(db: Knex, email: string, exceptUserId?: string): Promise<boolean> {
  return !!(await findUserIdByEmail(db, email, { exceptUserId }));
}

/**
 * Whether an address is taken for a change that proves it (an email change or link confirmed from
 * its mail): an email sign-in has it (any user's: the sign-in's key is unique), or another live
 * user proved it. An address another user only typed in does not stand in the way: the proof
 * takes it from them (releaseUnprovenClaims), as a registration and a provider sign-in do.
 */
export async function emailProvenElsewhere(db: Knex, email: string, exceptUserId: string): Promise<boolean> {
  return (
    (await emailSignInExists(db, email)) || !!(await findUserIdByEmail(db, email, { exceptUserId, verifiedOnly: true }))
  );
}

/** Whether one of the user's own platform accounts carries this (lowercased) address. */
export async function ownsEmail(db: Knex, userId: string, email: string): Promise<boolean> {
  return !!(await db('platform_accounts').where('user_id', userId).whereRaw('lower(email) = ?', [email]).first('id'));
}

/** A platform account with what the readers of a user's accounts use of its platform. */
export type AccountWithPlatform = Omit<PlatformAccount, 'platform'> & {
  platform?: Pick<Platform, 'id' | 'slug' | 'name'>;
};

/** A user's platform accounts with their platforms' slug and name, oldest first. */
export async function userAccounts(db: Knex, userId: string): Promise<AccountWithPlatform[]> {
  return (await accountsInTurn(db, userId)) ?? [];
}

/**
 * The accounts (with their platform's slug and name, joined) of every user asked for in one turn:
 * one statement for all of them, its SQL compiled once (objection's withGraphJoined built and
 * compiled a join of both tables' columns on every batch: 720 µs of CPU, the route's largest cost).
 */
const PLATFORM_COLUMNS: ReadonlySet<string> = new Set(['_platform_slug', '_platform_name']);
const accountsSql = compiledOnce((db) =>
  db('platform_accounts as pa')
    .leftJoin('platforms as p', 'p.id', 'pa.platform_id')
    .select('pa.*', 'p.slug as _platform_slug', 'p.name as _platform_name')
    .whereRaw('pa.user_id = ANY(?)', [[]])
    .orderBy([{ column: 'pa.created_at' }, { column: 'pa.id' }]),
);
const accountsInTurn = turnBatcherByDb(async (db, userIds) => {
  const { rows } = await db.raw<{ rows: Array<Record<string, unknown>> }>(accountsSql(db), [userIds]);
  return groupBy(
    rows,
    (r) => String(r.user_id),
    (r): AccountWithPlatform => {
      const account = PlatformAccount.fromDatabaseJson(withoutColumns(r, PLATFORM_COLUMNS)) as AccountWithPlatform;
      if (r._platform_slug != null)
        account.platform = { id: account.platform_id, slug: String(r._platform_slug), name: String(r._platform_name) };
      return account;
    },
  );
});

/** A user (deleted or not) with what the user presenters show of them, read in one statement. */
export interface UserView {
  user: User;
  /** Platform accounts with their platform's slug, oldest first (as userAccounts). */
  accounts: DisplayedAccount[];
  /** Whether an active ban holds (findActiveBan). */
  isBanned: boolean;
  /** The platform of the most recent sign-in that named one (profile `provider`). */
  lastSignInPlatform: string | null;
}

type ViewRow = Record<string, unknown> & { _accounts: AccountJson[]; _banned: boolean; _last: string | null };

/** The users table with what the user presenters show of each user, as columns. */
function viewQuery(db: Knex): Knex.QueryBuilder {
  return db('users as u').select(
    'u.*',
    db.raw(
      `COALESCE((SELECT json_agg(json_build_object('id', pa.id, 'username', pa.username, 'email', pa.email,
              'avatar_url', pa.avatar_url, 'created_at', pa.created_at, 'slug', p.slug)
              ORDER BY pa.created_at, pa.id)
         FROM platform_accounts pa JOIN platforms p ON p.id = pa.platform_id WHERE pa.user_id = u.id), '[]'::json)
         AS _accounts`,
    ),
    db.raw(
      // A scalar subquery, not EXISTS: PostgreSQL may plan a correlated EXISTS as a hashed subplan,
      // one scan of every ban, once a batch holds a dozen users (5.6 against 0.4 ms for 20 users
      // with 10,000 bans).
      `COALESCE((SELECT true FROM bans b WHERE b.user_id = u.id AND b.unbanned_at IS NULL
                 AND (b.expires_at IS NULL OR b.expires_at > now()) LIMIT 1), false) AS _banned`,
    ),
    db.raw(
      `(SELECT s.platform_slug FROM sessions s WHERE s.user_id = u.id AND s.platform_slug IS NOT NULL
         ORDER BY s.created_at DESC LIMIT 1) AS _last`,
    ),
  );
}

function toView(row: ViewRow): UserView {
  const { _accounts, _banned, _last, ...userColumns } = row;
  return {
    user: User.fromDatabaseJson(userColumns),
    accounts: _accounts.map((a) => ({
      id: a.id,
      username: a.username,
      email: a.email,
      avatar_url: a.avatar_url,
      created_at: new Date(a.created_at),
      platform: { slug: a.slug },
    })),
    isBanned: _banned,
    lastSignInPlatform: _last,
  };
}

/** User views by id, batched per event-loop turn and database. */
const viewsByIdSql = compiledOnce((db) => viewQuery(db).whereRaw('u.id = ANY(?)', [[]]));
const readViews = turnBatcherByDb(async (db, ids) => {
  const { rows } = await db.raw<{ rows: ViewRow[] }>(viewsByIdSql(db), [ids]);
  return new Map(rows.map((r) => [String(r.id), r]));
});

/**
 * The user whose id `target` is (a value, or a subquery answering one id) with their accounts, ban
 * state and last sign-in platform, in one statement: single-user reads (profile, flattened user)
 * cost one round trip. Reads by id are batched per event-loop turn (`turnBatcher`).
 */
export async function userView(db: Knex, target: string | Knex.QueryBuilder): Promise<UserView | undefined> {
  if (typeof target !== 'string') {
    const row = (await viewQuery(db).where('u.id', target).first()) as ViewRow | undefined;
    return row && toView(row);
  }
  const row = await readViews(db, target);
  return row && toView(row);
}

interface AccountJson {
  id: string;
  username: string | null;
  email: string | null;
  avatar_url: string | null;
  created_at: string;
  slug: string;
}

/** The flattened user (spec §2) of a user id. */
export async function flatUser(db: Knex, userId: string): Promise<FlatUser> {
  const view = await userView(db, userId);
  if (!view) throw new Error(`user ${userId} vanished`);
  return presentFlatUser(view.user, view.accounts, view.isBanned);
}

/** The flattened user of the live user an address belongs to (findUserIdByEmail), in one statement. */
export async function flatUserByEmail(db: Knex, email: string): Promise<FlatUser | undefined> {
  // One batched read: concurrent lookups share one statement that finds each address's user and
  // reads that user's view, so a lookup costs one round trip, not two after each other.
  const row = await viewsByEmailInTurn(db, normaliseEmail(email));
  if (!row) return undefined;
  const { _email: _, ...viewRow } = row;
  const view = toView(viewRow as ViewRow);
  return presentFlatUser(view.user, view.accounts, view.isBanned);
}

/**
 * The view of the live user of every (lowercased) address asked for in one turn, keyed by address.
 * The user behind an address is chosen as userIdByEmailQuery does: the email platform's account
 * first, then verified, primary and oldest.
 */
const viewsByEmailSql = compiledOnce((db) =>
  viewQuery(db)
    .select('m._email')
    .joinRaw(
      `JOIN (SELECT DISTINCT ON (lower(pa.email)) lower(pa.email) AS _email, pa.user_id
               FROM platform_accounts pa JOIN users lu ON lu.id = pa.user_id JOIN platforms p ON p.id = pa.platform_id
              WHERE lower(pa.email) = ANY(?) AND lu.deleted_at IS NULL
              ORDER BY lower(pa.email), (p.slug = 'email') DESC, (pa.email_verified_at IS NOT NULL) DESC,
                       pa.is_primary DESC, pa.created_at ASC) m ON m.user_id = u.id`,
      [[]],
    ),
);
const viewsByEmailInTurn = turnBatcherByDb(async (db, emails) => {
  const { rows } = await db.raw<{ rows: Array<ViewRow & { _email: string }> }>(viewsByEmailSql(db), [emails]);
  return new Map(rows.map((r) => [r._email, r]));
});

/** A user's active ban (as findActiveBan decides), and whether the user exists (deleted or not), in one statement. */
const activeBanOf = latestOfUser(
  Ban,
  (q, db) =>
    q
      .whereNull('bans.unbanned_at')
      .where((w) => w.whereNull('bans.expires_at').orWhere('bans.expires_at', '>', db.fn.now()))
      .orderBy('bans.banned_at', 'desc'),
  { includeDeleted: true },
);
export async function userActiveBan(db: Knex, userId: string): Promise<{ row: Ban | undefined } | undefined> {
  return activeBanOf(db, userId);
}

/** Every ban of a user, newest first. */
export async function banHistory(db: Knex, userId: string): Promise<Ban[]> {
  return rowsBy(Ban, 'user_id', [['banned_at', 'desc']], db).load(userId);
}

/** Whether the user holds the role (a direct assignment). */
export async function hasRole(db: Knex, userId: string, roleId: string): Promise<boolean> {
  return !!(await db('user_roles').where({ user_id: userId, role_id: roleId }).first('role_id'));
}

type LatestRow = Record<string, unknown> & { _user_id: string };

/** The column latestOfUser adds to each row: whose row it is. */
const LATEST_COLUMNS: ReadonlySet<string> = new Set(['_user_id']);

/** A read made by `latestOfUser`. */
export type LatestOfUser<M> = (db: Knex, userId: string) => Promise<{ row: M | undefined } | undefined>;

/**
 * The read of a user's newest row of a table (`pick` narrows and orders a query on it; it is
 * limited to one row of the user) together with whether the user exists, in one statement (a
 * LATERAL join): undefined when there is no such user (no live one unless `includeDeleted`),
 * `{ row: undefined }` when the user has no such row. For single-resource reads that would
 * otherwise load the user first.
 *
 * Define it once (module level): its statement is built and compiled on first use only, and the
 * reads of one event-loop turn share it (`turnBatcherByDb`), one `WHERE u.id = ANY($1)` for all.
 * `pick` gets the database for its expressions (`db.fn.now()`: the database's clock keeps the
 * statement the same for every call); a value in it is fixed for the read's lifetime.
 */
export function latestOfUser<M extends Model>(
  model: typeof Model & (new () => M),
  pick: (q: Knex.QueryBuilder, db: Knex) => void,
  opts: { includeDeleted?: boolean } = {},
): LatestOfUser<M> {
  const table = model.tableName;
  let compiled: { sql: string; bindings: readonly unknown[]; idsAt: number } | undefined;
  const compile = (db: Knex) => {
    const latest = db(table).select(`${table}.*`).whereRaw('??.user_id = u.id', [table]).limit(1);
    pick(latest, db);
    const sub = latest.toSQL();
    const ids: string[] = [];
    const q = db('users as u')
      .joinRaw(`LEFT JOIN LATERAL (${sub.sql}) AS x ON true`, [...sub.bindings])
      .whereRaw('u.id = ANY(?)', [ids])
      .select(db.raw('u.id::text AS _user_id'), 'x.*');
    if (!opts.includeDeleted) q.whereNull('u.deleted_at');
    const { sql, bindings } = q.toSQL();
    const idsAt = bindings.indexOf(ids as never);
    if (idsAt < 0) throw new Error(`latestOfUser(${table}): the ids parameter is not among the bindings`);
    return { sql, bindings, idsAt };
  };
  const read = turnBatcherByDb(async (db, ids) => {
    compiled ??= compile(db);
    const bindings = [...compiled.bindings];
    bindings[compiled.idsAt] = ids;
    // Sent raw, as a named prepared statement (shared/preparedStatements.ts).
    const { rows } = await db.raw<{ rows: LatestRow[] }>(compiled.sql, bindings as Knex.RawBinding[]);
    return new Map(rows.map((r) => [r._user_id, r]));
  });
  const idColumn = model.idColumn as string;
  return async (db, userId) => {
    const found = await read(db, userId);
    if (!found) return undefined;
    const columns = withoutColumns(found, LATEST_COLUMNS);
    return { row: columns[idColumn] == null ? undefined : (model.fromDatabaseJson(columns) as M) };
  };
}

/** The live users of a turn's platform accounts, keyed `slug\u0000platformUserId`: one statement. */
const platformAccountUsersInTurn = turnBatcherByDb<string>(async (db, keys) => {
  const pairs = keys.map((k) => k.split('\u0000'));
  const { rows } = await db.raw<{ rows: Array<{ slug: string; platform_user_id: string; user_id: string }> }>(
    `SELECT p.slug, pa.platform_user_id, pa.user_id
       FROM platform_accounts pa
       JOIN platforms p ON p.id = pa.platform_id
       JOIN users u ON u.id = pa.user_id
      WHERE (p.slug, pa.platform_user_id) IN (SELECT * FROM unnest(?::text[], ?::text[]))
        AND u.deleted_at IS NULL`,
    [pairs.map((p) => p[0]), pairs.map((p) => p[1] ?? '')],
  );
  return new Map(rows.map((r) => [`${r.slug}\u0000${r.platform_user_id}`, r.user_id]));
});

/**
 * The id of the live user a platform account belongs to, or undefined. Lookups of one turn share a
 * statement: a GraphQL document of many aliased findUserByPlatform fields costs one, not one each.
 */
export function userIdOfPlatformAccount(db: Knex, slug: string, platformUserId: string): Promise<string | undefined> {
  return platformAccountUsersInTurn(db, `${slug}\u0000${platformUserId}`);
}
