import test from 'ava';
import type { Knex } from 'knex';
import knexFactory from 'knex';
import { createTestDatabase } from '../helpers/db';
import {
  KEYED_ROW_COUNTERS,
  KeyedRowCounter,
  ROW_COUNTERS,
  readCounter,
  RowCounter,
} from '../../shared/queries/counters';

let db: Knex;
let drop: () => Promise<void>;

test.before(async () => {
  const d = await createTestDatabase();
  drop = d.drop;
  db = knexFactory({ client: 'pg', connection: d.url, pool: { min: 0, max: 8 } });
});
test.after.always(async () => {
  await db?.destroy();
  await drop?.();
});

/** What the counter should say: a COUNT over its table with its predicate. */
async function counted(name: RowCounter): Promise<number> {
  const c = ROW_COUNTERS[name];
  const { rows } = await db.raw(`SELECT count(*)::int AS n FROM ${c.table} WHERE ${c.where}`);
  return rows[0].n;
}

test.serial('every counter starts at its table count and follows inserts, deletes and truncates', async (t) => {
  for (const name of Object.keys(ROW_COUNTERS) as RowCounter[])
    t.is(await readCounter(db, name), await counted(name), name);
  await db.raw(`INSERT INTO devices (name) SELECT 'c' || i FROM generate_series(1, 25) i`);
  t.is(await readCounter(db, 'devices'), await counted('devices'));
  await db('devices').where('name', 'like', 'c1%').delete();
  t.is(await readCounter(db, 'devices'), await counted('devices'));
  // A rolled-back write leaves the counter as it was.
  await db
    .transaction(async (trx) => {
      await trx('devices').insert({ name: 'rolled back' });
      throw new Error('rollback');
    })
    .catch(() => undefined);
  t.is(await readCounter(db, 'devices'), await counted('devices'));
  await db.raw('TRUNCATE devices CASCADE');
  t.is(await readCounter(db, 'devices'), 0);
  t.is(await counted('devices'), 0);
});

test.serial('a predicate counter follows updates that move rows in and out of it', async (t) => {
  await db.raw(`INSERT INTO users (username) SELECT 'cnt_' || i FROM generate_series(1, 10) i`);
  const live0 = await readCounter(db, 'users_live');
  t.is(live0, await counted('users_live'));
  await db('users').where('username', 'cnt_1').update({ deleted_at: db.fn.now() });
  await db.raw(`UPDATE users SET deleted_at = now() WHERE username IN ('cnt_1', 'cnt_2', 'cnt_3')`);
  t.is(await readCounter(db, 'users_live'), live0 - 3);
  t.is(await readCounter(db, 'users_live'), await counted('users_live'));
  // An update that keeps the predicate's value changes nothing.
  await db.raw(`UPDATE users SET username = username || 'x' WHERE username LIKE 'cnt\\_%'`);
  t.is(await readCounter(db, 'users_live'), await counted('users_live'));
  await db.raw(`UPDATE users SET deleted_at = NULL WHERE username LIKE 'cnt\\_%'`);
  t.is(await readCounter(db, 'users_live'), live0);
  t.is(await readCounter(db, 'users_all'), await counted('users_all'));
});

test.serial('concurrent writers on many connections keep the counter exact', async (t) => {
  const before = await readCounter(db, 'geofences');
  await Promise.all(
    Array.from({ length: 40 }, (_, i) =>
      db.transaction(async (trx) => {
        await trx.raw(
          `INSERT INTO geofences (name, latitude, longitude, radius_km) SELECT 'g${i}-' || j, 1, 1, 1 FROM generate_series(1, ?::int) j`,
          [1 + (i % 5)],
        );
        if (i % 3 === 0) await trx('geofences').where('name', `g${i}-1`).delete();
      }),
    ),
  );
  t.is(await readCounter(db, 'geofences'), await counted('geofences'));
  t.true((await readCounter(db, 'geofences')) > before);
});

/** A keyed counter's non-zero values, by key, in key order. */
async function keyedValues(name: KeyedRowCounter): Promise<Array<{ k: string; n: number }>> {
  const { rows } = await db.raw(
    `SELECT substr(counter, length(?) + 2) AS k, sum(n)::int AS n FROM row_counters
      WHERE counter LIKE ? || ':%' GROUP BY 1 HAVING sum(n) <> 0 ORDER BY 1`,
    [name, name],
  );
  return rows as Array<{ k: string; n: number }>;
}

/** The same counts taken with count(*) over the counter's table, by its column. */
async function keyedCounted(name: KeyedRowCounter): Promise<Array<{ k: string; n: number }>> {
  const { table, column } = KEYED_ROW_COUNTERS[name];
  const { rows } = await db.raw(
    `SELECT ${column}::text AS k, count(*)::int AS n FROM ${table} WHERE ${column} IS NOT NULL GROUP BY 1 ORDER BY 1`,
  );
  return rows as Array<{ k: string; n: number }>;
}

test.serial('a keyed counter follows each key through inserts, deletes, key changes and truncates', async (t) => {
  const byUser = () => keyedValues('audit_events_by_user');
  const counted = () => keyedCounted('audit_events_by_user');
  const insert = (user: string | null, n: number) =>
    db.raw(
      `INSERT INTO audit_events (user_id, event_type, status, source_service, metadata)
       SELECT ?, 'login', 'success', 'api', '{}' FROM generate_series(1, ?)`,
      [user, n],
    );
  await Promise.all([insert('ext-bot:1', 5), insert('ext-bot:2', 3), insert(null, 2), insert('ext-bot:1', 2)]);
  t.deepEqual(
    (await byUser()).filter((r) => r.k.startsWith('ext-bot')),
    [
      { k: 'ext-bot:1', n: 7 },
      { k: 'ext-bot:2', n: 3 },
    ],
  );
  t.deepEqual(await byUser(), await counted());
  await db.raw(
    `DELETE FROM audit_events WHERE id IN (SELECT id FROM audit_events WHERE user_id = 'ext-bot:1' LIMIT 4)`,
  );
  await db.raw(`UPDATE audit_events SET user_id = 'ext-bot:3' WHERE user_id = 'ext-bot:2'`);
  t.deepEqual(await byUser(), await counted());
  t.deepEqual(
    (await byUser()).filter((r) => r.k.startsWith('ext-bot')),
    [
      { k: 'ext-bot:1', n: 3 },
      { k: 'ext-bot:3', n: 3 },
    ],
  );
  await db.raw('TRUNCATE audit_events CASCADE');
  t.deepEqual(await byUser(), []);
});

test.serial("a guild's member counter follows inserts, moves between guilds and a cascaded guild delete", async (t) => {
  const byGuild = () => keyedValues('chat_members_by_guild');
  const counted = () => keyedCounted('chat_members_by_guild');
  const [a, b] = await db('chat_guilds')
    .insert([
      { guild_id: '900000000000000001', name: 'counter a' },
      { guild_id: '900000000000000002', name: 'counter b' },
    ])
    .returning('id')
    .then((rows: Array<{ id: string }>) => rows.map((r) => r.id));
  const members = (guild: string, from: number, n: number) =>
    db.raw(
      `INSERT INTO chat_members (guild_id, user_id, username) SELECT ?, (? + j)::text, 'm' || j FROM generate_series(1, ?::int) j`,
      [guild, from, n],
    );
  await Promise.all([members(a, 0, 30), members(b, 100, 12)]);
  t.deepEqual(
    (await byGuild()).filter((r) => r.k === a || r.k === b),
    [
      { k: a, n: 30 },
      { k: b, n: 12 },
    ].sort((x, y) => (x.k < y.k ? -1 : 1)),
  );
  await db('chat_members').where('guild_id', a).whereIn('user_id', ['1', '2', '3']).update({ guild_id: b });
  await db('chat_guilds').where('id', b).delete(); // its members go by ON DELETE CASCADE
  t.deepEqual(await byGuild(), await counted());
  t.deepEqual(
    (await byGuild()).filter((r) => r.k === a || r.k === b),
    [{ k: a, n: 27 }],
  );
});

test.serial("trips' status counter follows inserts, status changes, other updates and deletes", async (t) => {
  const byStatus = () => keyedValues('trips_by_status');
  const counted = () => keyedCounted('trips_by_status');
  await db.raw(
    `INSERT INTO trips (name, status) SELECT 'st' || i, (ARRAY['draft','active','paused','completed'])[1 + i % 4]
       FROM generate_series(1, 40) i`,
  );
  t.deepEqual(await byStatus(), await counted());
  await db.raw(`UPDATE trips SET status = 'completed' WHERE name IN ('st1', 'st2', 'st5')`);
  await db.raw(`UPDATE trips SET name = name || '-renamed' WHERE status = 'draft'`);
  await db.raw(`DELETE FROM trips WHERE name IN ('st3', 'st7')`);
  t.deepEqual(await byStatus(), await counted());
  const { rows } = await db.raw(`SELECT count(*)::int AS n FROM trips WHERE status = 'completed'`);
  t.deepEqual(
    (await byStatus()).find((r) => r.k === 'completed'),
    { k: 'completed', n: rows[0].n },
  );
});
