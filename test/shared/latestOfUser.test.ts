import test from 'ava';
import { randomUUID } from 'node:crypto';
import { Ban } from '../../shared/models/Ban';
import { latestOfUser, userActiveBan } from '../../shared/queries/users';
import { createUser } from '../helpers/factories';
import { useStack } from '../helpers/stack';

const stack = useStack(test);

/** The statements on bans the stack's knex sends while `fn` runs. */
async function banStatements<T>(fn: () => Promise<T>): Promise<{ result: T; sql: string[] }> {
  const db = stack().db;
  const sql: string[] = [];
  const listener = (q: { sql: string }) => {
    if (/\bbans\b/.test(q.sql)) sql.push(q.sql);
  };
  db.on('query', listener);
  try {
    return { result: await fn(), sql };
  } finally {
    db.off('query', listener);
  }
}

const hour = 3600_000;

test.serial('concurrent reads share one statement; each gets its own newest row, none, or no user', async (t) => {
  const db = stack().db;
  const [a, b, c, gone] = await Promise.all([createUser(db), createUser(db), createUser(db), createUser(db)]);
  await db('bans').insert([
    { user_id: a.id, reason: 'older', banned_at: new Date(Date.now() - 2 * hour) },
    { user_id: a.id, reason: 'newer', banned_at: new Date(Date.now() - hour) },
    // b's only ban has expired, c's was lifted: neither is active.
    {
      user_id: b.id,
      reason: 'expired',
      banned_at: new Date(Date.now() - 2 * hour),
      expires_at: new Date(Date.now() - hour),
    },
    { user_id: c.id, reason: 'lifted', banned_at: new Date(Date.now() - hour), unbanned_at: new Date() },
    { user_id: gone.id, reason: 'deleted user', banned_at: new Date() },
  ]);
  await db('users').where('id', gone.id).update({ deleted_at: new Date() });

  const { result, sql } = await banStatements(() =>
    Promise.all([a.id, b.id, c.id, gone.id, randomUUID()].map((id) => userActiveBan(db, id))),
  );
  t.is(sql.length, 1, sql.join('\n'));
  t.regex(sql[0], /= ANY\(/);
  const [ra, rb, rc, rgone, rnone] = result;
  t.true(ra!.row instanceof Ban);
  t.is(ra!.row!.reason, 'newer');
  t.true(ra!.row!.banned_at instanceof Date);
  t.false('_user_id' in ra!.row!);
  t.deepEqual(rb, { row: undefined });
  t.deepEqual(rc, { row: undefined });
  // The ban read includes deleted users.
  t.is(rgone!.row!.reason, 'deleted user');
  t.is(rnone, undefined);

  // A later read is another statement and sees what was committed since.
  await db('bans').where({ user_id: a.id }).update({ unbanned_at: new Date() });
  const again = await banStatements(() => userActiveBan(db, a.id));
  t.is(again.sql.length, 1);
  t.deepEqual(again.result, { row: undefined });
});

test.serial(
  'a read for live users only says a deleted user does not exist; its statement is compiled once',
  async (t) => {
    const db = stack().db;
    let picks = 0;
    const anyBan = latestOfUser(Ban, (q) => {
      picks++;
      q.orderBy('bans.banned_at', 'desc');
    });
    const [live, gone] = await Promise.all([createUser(db), createUser(db)]);
    await db('bans').insert([
      { user_id: live.id, reason: 'x', banned_at: new Date() },
      { user_id: gone.id, reason: 'y', banned_at: new Date() },
    ]);
    await db('users').where('id', gone.id).update({ deleted_at: new Date() });
    t.is((await anyBan(db, live.id))!.row!.reason, 'x');
    t.is(await anyBan(db, gone.id), undefined);
    await Promise.all([anyBan(db, live.id), anyBan(db, gone.id)]);
    t.is(picks, 1);
  },
);
