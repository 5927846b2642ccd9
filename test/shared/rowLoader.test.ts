import test from 'ava';
import { randomUUID } from 'node:crypto';
import knex from 'knex';
import { Role } from '../../shared/models/Role';
import { User } from '../../shared/models/User';
import { OAuthClient } from '../../shared/models/OAuthClient';
import { AuditEvent } from '../../shared/models/AuditEvent';
import {
  coalesced,
  computeOncePerTurn,
  pagesOf,
  readOncePerTurn,
  RowLoader,
  rowsBy,
  turnBatcher,
  turnLoader,
} from '../../shared/rowLoader';
import { createKey, createUser } from '../helpers/factories';
import { explainPrepared, heapRowsRead, vacuumSettled } from '../helpers/statements';
import { useStack } from '../helpers/stack';

const stack = useStack(test);

/** Counts the statements on roles the models' knex sends while `fn` runs (the process's outbox relay polls meanwhile). */
async function countQueries<T>(fn: () => Promise<T>): Promise<{ result: T; sql: string[]; bindings: unknown[][] }> {
  const sql: string[] = [];
  const bindings: unknown[][] = [];
  const listener = (q: { sql: string; bindings?: unknown[] }) => {
    if (!/\broles\b/.test(q.sql)) return;
    sql.push(q.sql);
    bindings.push(q.bindings ?? []);
  };
  Role.knex().on('query', listener);
  try {
    return { result: await fn(), sql, bindings };
  } finally {
    Role.knex().off('query', listener);
  }
}

test.serial('concurrent loads are answered by one statement, each with its own row or undefined', async (t) => {
  const roles = new RowLoader(Role);
  const ids = ['role_user', 'role_admin', 'nope', 'role_user', 'role_developer', 'ROLE_USER'];
  const { result, sql, bindings } = await countQueries(() => Promise.all(ids.map((id) => roles.load(id))));
  t.is(sql.length, 1);
  t.regex(sql[0], /= ANY\(/);
  // Each key once, though two callers asked for role_user.
  t.deepEqual(bindings[0], [['role_user', 'role_admin', 'nope', 'role_developer', 'ROLE_USER']]);
  t.deepEqual(
    result.map((r) => r?.id),
    ['role_user', 'role_admin', undefined, 'role_user', 'role_developer', undefined],
  );
  t.true(result[0] instanceof Role);
  t.true(result[1]!.created_at instanceof Date);
  // Loads made later are another batch: nothing is cached between batches.
  const again = await countQueries(() => roles.load('role_admin'));
  t.is(again.sql.length, 1);
});

test.serial('a committed change is seen by the next load (no cache between batches)', async (t) => {
  const roles = new RowLoader(Role);
  t.is((await roles.load('role_moderator'))!.description === 'changed', false);
  await stack().db('roles').where({ id: 'role_moderator' }).update({ description: 'changed' });
  t.is((await roles.load('role_moderator'))!.description, 'changed');
});

test.serial('uuid ids match whatever their case; a malformed id fails alone, not its batch', async (t) => {
  const users = new RowLoader(User);
  const a = await createUser(stack().db);
  const b = await createUser(stack().db);
  const [ra, rb, missing, bad] = await Promise.allSettled([
    users.load(a.id.toUpperCase()),
    users.load(b.id),
    users.load(randomUUID()),
    users.load('not-a-uuid'),
  ]);
  t.is(ra.status === 'fulfilled' && ra.value?.id, a.id);
  t.is(rb.status === 'fulfilled' && rb.value?.id, b.id);
  t.deepEqual(missing, { status: 'fulfilled', value: undefined });
  t.is(bad.status, 'rejected');
});

test.serial('GET /v1/roles/:id under concurrency: every response carries its own role', async (t) => {
  const s = stack();
  const dev = await createUser(s.db, { roles: ['role_developer'] });
  const { key } = await createKey({ userId: dev.id, scopes: ['roles:read'] });
  const ids = ['role_user', 'role_admin', 'role_moderator', 'role_developer', 'role_api_read_only', 'role_missing'];
  const responses = await Promise.all(
    Array.from({ length: 60 }, (_, i) => s.request('GET', `/v1/roles/${ids[i % ids.length]}`, { token: key })),
  );
  responses.forEach((r, i) => {
    const id = ids[i % ids.length];
    if (id === 'role_missing') {
      t.is(r.status, 404);
      t.is(r.body.error, 'NotFound');
    } else {
      t.is(r.status, 200);
      t.is(r.body.data.id, id);
      t.is(r.body._links.self, `/v1/roles/${id}`);
    }
  });
});

test.serial('a column added while the process runs: reads go on (the prepared statement is replaced)', async (t) => {
  // One connection, so the second read meets the statement the first one prepared.
  const db1 = knex({ client: 'pg', connection: stack().config.databaseUrl, pool: { min: 0, max: 1 } });
  class OneConnectionRole extends Role {}
  OneConnectionRole.knex(db1);
  const roles = new RowLoader(OneConnectionRole);
  try {
    t.is((await roles.load('role_user'))?.id, 'role_user');
    await stack().db.schema.alterTable('roles', (tb) => void tb.text('added_later').nullable());
    const after = await roles.load('role_user');
    t.is(after?.id, 'role_user');
    t.true('added_later' in after!);
    const pair = await Promise.all([roles.load('role_admin'), roles.load('role_user')]);
    t.deepEqual(
      pair.map((r) => r?.id),
      ['role_admin', 'role_user'],
    );
  } finally {
    await stack().db.schema.alterTable('roles', (tb) => void tb.dropColumn('added_later'));
    await db1.destroy();
  }
});

test.serial('rowsBy: concurrent owners share one statement; each gets its own rows, in order', async (t) => {
  const db = stack().db;
  const [a, b, none] = [await createUser(db), await createUser(db), await createUser(db)];
  const at = (s: number) => new Date(Date.UTC(2026, 0, 1, 0, 0, s));
  await db('oauth_clients').insert([
    { user_id: a.id, name: 'a-old', created_at: at(1) },
    { user_id: b.id, name: 'b-only', created_at: at(2) },
    { user_id: a.id, name: 'a-new', created_at: at(3) },
  ]);
  const clients = rowsBy(OAuthClient, 'user_id', [['created_at', 'desc']], db);
  const sql: string[] = [];
  const listener = (q: { sql: string }) => {
    if (/oauth_clients/.test(q.sql)) sql.push(q.sql);
  };
  db.on('query', listener);
  let lists: OAuthClient[][];
  try {
    lists = await Promise.all([a.id, b.id, none.id, a.id.toUpperCase()].map((id) => clients.load(id)));
  } finally {
    db.off('query', listener);
  }
  t.is(sql.length, 1);
  t.deepEqual(
    lists.map((l) => l.map((c) => c.name)),
    [['a-new', 'a-old'], ['b-only'], [], ['a-new', 'a-old']],
  );
  t.true(lists[0][0] instanceof OAuthClient);
  // Nothing is kept between batches: a new row is in the next read.
  await db('oauth_clients').insert({ user_id: b.id, name: 'b-second', created_at: at(4) });
  t.deepEqual(
    (await clients.load(b.id)).map((c) => c.name),
    ['b-second', 'b-only'],
  );
});

test.serial(
  'readOncePerTurn: identical reads in one turn are one statement; others and failures stay apart',
  async (t) => {
    const db = stack().db;
    const sql: string[] = [];
    const listener = (q: { sql: string }) => {
      if (/from "roles"/.test(q.sql)) sql.push(q.sql);
    };
    db.on('query', listener);
    try {
      const text = 'select id from "roles" where id = ANY(?) order by id';
      const [a, b, c, d] = await Promise.all([
        readOncePerTurn(db, text, [['role_user', 'role_admin']]),
        readOncePerTurn(db, text, [['role_user', 'role_admin']]),
        readOncePerTurn(db, text, [['role_developer']]),
        readOncePerTurn(db, text, [['role_user', 'role_admin']]),
      ]);
      t.is(sql.length, 2);
      t.deepEqual(
        a.map((r) => r.id),
        ['role_admin', 'role_user'],
      );
      t.is(b, a);
      t.is(d, a);
      t.deepEqual(
        c.map((r) => r.id),
        ['role_developer'],
      );
      // A failing statement fails each of its callers with the database's own error.
      const bad = 'select nope from "roles"';
      const failures = await Promise.allSettled([readOncePerTurn(db, bad, []), readOncePerTurn(db, bad, [])]);
      for (const f of failures) {
        t.is(f.status, 'rejected');
        t.regex(String((f as PromiseRejectedResult).reason), /nope/);
      }
    } finally {
      db.off('query', listener);
    }
  },
);

test.serial('pagesOf: pages of several parents in one statement, each with its own rows and exact total', async (t) => {
  const db = stack().db;
  const [a, b, none] = [await createUser(db), await createUser(db), await createUser(db)];
  const at = (s: number) => new Date(Date.UTC(2026, 1, 1, 0, 0, s));
  // a: 5 clients, b: 2; text parents with a space in the key go through as well (name as parent).
  await db('oauth_clients').insert([
    ...[1, 2, 3, 4, 5].map((i) => ({ user_id: a.id, name: `a ${i}`, created_at: at(i) })),
    ...[1, 2].map((i) => ({ user_id: b.id, name: `b ${i}`, created_at: at(i) })),
  ]);
  const byOwner = pagesOf(OAuthClient, 'user_id', 'uuid', [['created_at', 'desc']]);
  const byName = pagesOf(OAuthClient, 'name', 'text', [['created_at', 'asc']]);
  const sql: string[] = [];
  const listener = (q: { sql: string }) => {
    if (/LATERAL/.test(q.sql)) sql.push(q.sql);
  };
  db.on('query', listener);
  try {
    const [a1, a2, b1, n1, a1again, named] = await Promise.all([
      byOwner.load(db, a.id, 2, 0),
      byOwner.load(db, a.id.toUpperCase(), 2, 2),
      byOwner.load(db, b.id, 2, 0),
      byOwner.load(db, none.id, 2, 0),
      byOwner.load(db, a.id, 2, 0),
      byName.load(db, 'a 3', 10, 0),
    ]);
    // One statement per (limit, offset) of each list: (2,0) and (2,2) by owner, (10,0) by name.
    t.is(sql.length, 3);
    const names = (p: { results: OAuthClient[] }) => p.results.map((c) => c.name);
    t.deepEqual([names(a1), a1.total], [['a 5', 'a 4'], 5]);
    t.deepEqual([names(a2), a2.total], [['a 3', 'a 2'], 5]);
    t.deepEqual([names(b1), b1.total], [['b 2', 'b 1'], 2]);
    t.deepEqual([names(n1), n1.total], [[], 0]);
    t.deepEqual(names(a1again), ['a 5', 'a 4']);
    t.deepEqual([names(named), named.total], [['a 3'], 1]);
    t.true(a1.results[0] instanceof OAuthClient);
  } finally {
    db.off('query', listener);
  }
});

/** Every node of a plan of `EXPLAIN (ANALYZE, FORMAT JSON)`, depth first. */
function planNodes(node: Record<string, unknown>): Array<Record<string, unknown>> {
  const children = (node.Plans as Array<Record<string, unknown>> | undefined) ?? [];
  return [node, ...children.flatMap(planNodes)];
}

test.serial('pagesOf: the total of each parent is counted once, not once per row of its page', async (t) => {
  const db = stack().db;
  const owners = [await createUser(db), await createUser(db), await createUser(db)];
  const at = (s: number) => new Date(Date.UTC(2026, 2, 1, 0, 0, s));
  await db('oauth_clients').insert(
    owners.flatMap((o, j) => [1, 2, 3, 4, 5, 6].map((i) => ({ user_id: o.id, name: `p${j} ${i}`, created_at: at(i) }))),
  );
  const byOwner = pagesOf(OAuthClient, 'user_id', 'uuid', [['created_at', 'asc']]);
  const seen: Array<{ sql: string; bindings: unknown[] }> = [];
  const listener = (q: { sql: string; bindings: unknown[] }) => {
    if (/LATERAL/.test(q.sql)) seen.push(q);
  };
  db.on('query', listener);
  let pages;
  try {
    pages = await Promise.all(owners.map((o) => byOwner.load(db, o.id, 5, 0)));
  } finally {
    db.off('query', listener);
  }
  t.deepEqual(
    pages.map((p) => [p.results.length, p.total]),
    [
      [5, 6],
      [5, 6],
      [5, 6],
    ],
  );
  t.is(seen.length, 1);
  // The statement as sent, run again under EXPLAIN ANALYZE: the count runs once per parent (3),
  // where a count in the select list ran once per returned row (15).
  const { rows } = await db.raw<{ rows: Array<{ 'QUERY PLAN': Array<{ Plan: Record<string, unknown> }> }> }>(
    `EXPLAIN (ANALYZE, FORMAT JSON) ${seen[0].sql.replace(/\$\d+/g, '?')}`,
    seen[0].bindings as never,
  );
  const aggregates = planNodes(rows[0]['QUERY PLAN'][0].Plan).filter((n) => n['Node Type'] === 'Aggregate');
  t.true(aggregates.length > 0, 'the plan counts with an aggregate');
  for (const a of aggregates) t.is(a['Actual Loops'], owners.length);
});

test.serial(
  'pagesOf: pages past the middle are read from the end, past the end not at all: the same pages',
  async (t) => {
    const db = stack().db;
    // Parents of 0, 3, 10, 23 and 40 clients with ties on created_at (the id breaks them).
    const sizes = [0, 3, 10, 23, 40];
    const owners: Array<{ id: string }> = [];
    for (const n of sizes) {
      const o = await createUser(db);
      owners.push(o);
      if (n)
        await db('oauth_clients').insert(
          Array.from({ length: n }, (_, i) => ({
            user_id: o.id,
            name: `ends ${n} ${i}`,
            created_at: new Date(Date.UTC(2026, 3, 1, 0, 0, Math.floor(i / 3))),
          })),
        );
    }
    const ORDER = [
      ['created_at', 'desc'],
      ['id', 'desc'],
    ] as const;
    const lists = {
      exact: pagesOf(OAuthClient, 'user_id', 'uuid', ORDER),
      // A capped count is exact only below its cap: at the cap, pages are read forward.
      capped: pagesOf(OAuthClient, 'user_id', 'uuid', ORDER, { countCap: 20 }),
      // An order that does not end in the primary key cannot be reversed exactly: forward only.
      unreversible: pagesOf(OAuthClient, 'user_id', 'uuid', [['created_at', 'desc']]),
    };
    const forward = async (ownerId: string, limit: number, offset: number) =>
      (
        await db.raw(
          'SELECT id FROM oauth_clients WHERE user_id = ? ORDER BY created_at DESC, id DESC LIMIT ? OFFSET ?',
          [ownerId, limit, offset],
        )
      ).rows.map((r: { id: string }) => r.id);
    const seen: Array<{ sql: string; bindings: unknown[] }> = [];
    const listener = (q: { sql: string; bindings: unknown[] }) => {
      if (/LATERAL/.test(q.sql)) seen.push(q);
    };
    db.on('query', listener);
    try {
      for (const [limit, offset] of [
        [5, 0],
        [5, 5],
        [5, 10],
        [5, 15],
        [5, 20],
        [5, 35],
        [7, 21],
        [3, 22],
        [10, 40],
        [100, 0],
        [1, 39],
      ]) {
        seen.length = 0;
        // Every parent in one statement per list: some read forward, some from the end, some past it.
        const pages = await Promise.all(
          Object.values(lists).flatMap((list) => owners.map((o) => list.load(db, o.id, limit, offset))),
        );
        t.is(seen.length, Object.keys(lists).length, `limit ${limit} offset ${offset}`);
        let i = 0;
        for (const name of Object.keys(lists))
          for (const [j, o] of owners.entries()) {
            const page = pages[i++];
            const label = `${name}: ${sizes[j]} clients, limit ${limit} offset ${offset}`;
            if (name !== 'unreversible')
              t.deepEqual(
                page.results.map((c) => c.id),
                await forward(o.id, limit, offset),
                label,
              );
            else t.is(page.results.length, Math.max(0, Math.min(limit, sizes[j] - offset)), label);
            t.is(page.total, name === 'capped' ? Math.min(sizes[j], 20) : sizes[j], label);
          }
      }
    } finally {
      db.off('query', listener);
    }
  },
);

test.serial('pagesOf: a deep page reads only its rows from the end; a page past the end reads none', async (t) => {
  const db = stack().db;
  // A user's audit events: the total is the user's keyed row counter, the page an index range.
  const user = `deep-${randomUUID()}`;
  await db.raw(
    `INSERT INTO audit_events (user_id, event_type, resource_type, created_at)
     SELECT ?, 'login', 'user', timestamptz '2026-05-01' + (g / 4) * interval '1 second' FROM generate_series(1, 2000) g`,
    [user],
  );
  // VACUUM: an index-only scan reads no row of a page the visibility map marks all-visible.
  await vacuumSettled(db, 'audit_events');
  const list = pagesOf(
    AuditEvent,
    'user_id',
    'text',
    [
      ['created_at', 'desc'],
      ['id', 'desc'],
    ],
    { counter: 'audit_events_by_user' },
  );
  const forward = async (limit: number, offset: number) =>
    (
      await db.raw('SELECT id FROM audit_events WHERE user_id = ? ORDER BY created_at DESC, id DESC LIMIT ? OFFSET ?', [
        user,
        limit,
        offset,
      ])
    ).rows.map((r: { id: string }) => r.id);
  /**
   * One page, and the rows of audit_events the plans of its statement (as sent) read from the
   * table: a deep page's keys come off the index alone (an index-only scan reads no row unless it
   * fetches one from the heap), then its rows by key.
   */
  const read = async (limit: number, offset: number) => {
    const seen: Array<{ sql: string; bindings: unknown[] }> = [];
    const listener = (q: { sql: string; bindings: unknown[] }) => {
      if (/LATERAL/.test(q.sql)) seen.push(q);
    };
    db.on('query', listener);
    let page;
    try {
      page = await list.load(db, user, limit, offset);
    } finally {
      db.off('query', listener);
    }
    t.is(seen.length, 1);
    t.deepEqual(
      page.results.map((e) => e.id),
      await forward(limit, offset),
      `limit ${limit} offset ${offset}`,
    );
    t.is(page.total, 2000);
    const rows: Record<string, number> = {};
    for (const mode of ['generic', 'custom'] as const) {
      rows[mode] = heapRowsRead(await explainPrepared(db, seen[0], mode), 'audit_events');
    }
    return rows;
  };
  // The last page, read from the end: its 5 rows, not the 1,995 OFFSET walked first.
  t.deepEqual(await read(10, 1995), { generic: 5, custom: 5 });
  // Past the middle: from the end, 490 index entries skipped and 10 rows read (not 1,510 rows, nor
  // 500 read whole as before the deferred join).
  t.deepEqual(await read(10, 1500), { generic: 10, custom: 10 });
  // Past the end: no row at all.
  t.deepEqual(await read(10, 2000), { generic: 0, custom: 0 });
  t.deepEqual(await read(10, 5000), { generic: 0, custom: 0 });
  // Before the middle, forward as before.
  t.deepEqual(await read(10, 30), { generic: 40, custom: 40 });
});

test('turnLoader: a key asked for by several callers in one turn is fetched once; each caller gets its answer', async (t) => {
  const batches: string[][] = [];
  const loader = turnLoader<string>(async (keys) => {
    batches.push(keys);
    return keys.map((k) => (k === 'bad' ? new Error(`no ${k}`) : `value of ${k}`));
  });
  const asked = ['a', 'b', 'a', 'bad', 'b', 'a'];
  const answers = await Promise.allSettled(asked.map((k) => loader.load(k)));
  t.deepEqual(batches, [['a', 'b', 'bad']]);
  t.deepEqual(
    answers.map((r) => (r.status === 'fulfilled' ? r.value : (r.reason as Error).message)),
    ['value of a', 'value of b', 'value of a', 'no bad', 'value of b', 'value of a'],
  );
  // The next turn is another batch: nothing is kept.
  t.is(await loader.load('a'), 'value of a');
  t.deepEqual(batches.at(-1), ['a']);
});

test('turnBatcher: one user asked for by many callers (any case) is one row of the batch', async (t) => {
  const batches: string[][] = [];
  const read = turnBatcher(async (keys) => {
    batches.push(keys);
    return new Map(keys.map((k) => [k, k.length]));
  });
  const id = randomUUID();
  const other = randomUUID();
  const answers = await Promise.all([id, id.toUpperCase(), other, id].map((k) => read(k)));
  t.deepEqual(batches, [[id, other]]);
  t.deepEqual(answers, [36, 36, 36, 36]);
});

test('computeOncePerTurn: identical keys in one turn share one computation and its result or error', async (t) => {
  const shared = computeOncePerTurn<{ key: string; run: number }>();
  const db = stack().db;
  let runs = 0;
  const compute = (key: string) => async () => {
    runs++;
    const run = runs;
    await new Promise((r) => setImmediate(r));
    if (key === 'bad') throw new Error(`failed ${run}`);
    return { key, run };
  };
  const [a1, a2, b, a3] = await Promise.all([
    shared(db, 'a', compute('a')),
    shared(db, 'a', compute('a')),
    shared(db, 'b', compute('b')),
    shared(db, 'a', compute('a')),
  ]);
  t.is(runs, 2);
  t.is(a1, a2);
  t.is(a1, a3);
  t.deepEqual(a1, { key: 'a', run: 1 });
  t.deepEqual(b, { key: 'b', run: 2 });
  // A later turn computes again: nothing is kept between turns.
  const again = await shared(db, 'a', compute('a'));
  t.deepEqual(again, { key: 'a', run: 3 });
  // Another database never joins.
  const other = knex({ client: 'pg' });
  try {
    const [x, y] = await Promise.all([shared(db, 'a', compute('a')), shared(other, 'a', compute('a'))]);
    t.not(x, y);
  } finally {
    await other.destroy();
  }
  const errors = await Promise.allSettled([shared(db, 'bad', compute('bad')), shared(db, 'bad', compute('bad'))]);
  t.deepEqual(
    errors.map((e) => (e.status === 'rejected' ? (e.reason as Error).message : 'ok')),
    ['failed 6', 'failed 6'],
  );
});

test('coalesced: one computation per key at a time; callers during one share the next, started after they asked', async (t) => {
  const shared = coalesced<{ run: number; saw: number }>();
  const db = stack().db;
  // `version` stands for the data: a caller must see every change made before it asked.
  let version = 0;
  let runs = 0;
  const log: string[] = [];
  const gates: Array<() => void> = [];
  const compute = async () => {
    const run = ++runs;
    const saw = version;
    log.push(`start ${run}`);
    await new Promise<void>((r) => gates.push(r));
    log.push(`end ${run}`);
    if (saw < 0) throw new Error(`failed ${run}`);
    return { run, saw };
  };
  const turn = () => new Promise((r) => setImmediate(r));
  // Three callers in one turn: one computation, started at the end of the turn.
  const first = [shared(db, 'k', compute), shared(db, 'k', compute), shared(db, 'k', compute)];
  t.is(runs, 0);
  await turn();
  t.is(runs, 1);
  // While it runs, the data changes and more callers ask (over several turns): they wait for the next one.
  version = 1;
  const second = [shared(db, 'k', compute)];
  await turn();
  second.push(shared(db, 'k', compute));
  await turn();
  t.is(runs, 1, 'no second computation while the first runs');
  // Another key is not held back.
  const other = shared(db, 'other', compute);
  await turn();
  t.is(runs, 2);
  gates.shift()!(); // ends run 1: run 3 (the waiting callers) starts
  const a = await Promise.all(first);
  await turn();
  t.is(runs, 3);
  gates.shift()!(); // ends run 2 (other)
  gates.shift()!(); // ends run 3
  const b = await Promise.all(second);
  t.is(a[0], a[1]);
  t.is(a[0], a[2]);
  t.deepEqual(a[0], { run: 1, saw: 0 });
  t.is(b[0], b[1]);
  t.deepEqual(b[0], { run: 3, saw: 1 }, 'callers who asked after the change see it');
  t.deepEqual((await other).run, 2);
  t.deepEqual(log.slice(0, 4), ['start 1', 'start 2', 'end 1', 'start 3']);
  // Nothing is kept: the next caller computes afresh.
  const again = shared(db, 'k', compute);
  await turn();
  gates.shift()!();
  t.is((await again).run, 4);
  // An error reaches every caller of that computation, and the next computation is not affected.
  version = -1;
  const failing = [shared(db, 'k', compute), shared(db, 'k', compute)];
  await turn();
  gates.shift()!();
  const settled = await Promise.allSettled(failing);
  t.deepEqual(
    settled.map((e) => (e.status === 'rejected' ? (e.reason as Error).message : 'ok')),
    ['failed 5', 'failed 5'],
  );
  version = 2;
  const after = shared(db, 'k', compute);
  await turn();
  gates.shift()!();
  t.deepEqual(await after, { run: 6, saw: 2 });
});
