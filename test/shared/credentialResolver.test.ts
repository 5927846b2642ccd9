import test from 'ava';
import { trackerLinkFor } from '../../shared/caches/trackerLinks';
import { createKey, createUser } from '../helpers/factories';
import { useStack } from '../helpers/stack';

const stack = useStack(test);

/** Statements on api_keys the api's database sends while `fn` runs. */
async function keyLoads<T>(fn: () => Promise<T>): Promise<{ result: T; loads: number }> {
  const db = stack().db;
  let loads = 0;
  const listener = (q: { sql: string }) => {
    if (/from "api_keys"/.test(q.sql)) loads++;
  };
  db.on('query', listener);
  try {
    return { result: await fn(), loads };
  } finally {
    db.off('query', listener);
  }
}

test.serial('concurrent first requests with one token share one load', async (t) => {
  const s = stack();
  const user = await createUser(s.db, { roles: ['role_developer'] });
  const { key } = await createKey({ userId: user.id, scopes: ['gps:read'] });
  const credentials = s.api.services.credentials;
  const { result, loads } = await keyLoads(() =>
    Promise.all(Array.from({ length: 20 }, () => credentials.resolve(key))),
  );
  t.is(loads, 1);
  t.true(result.every((r) => r.ok));
  const principals = new Set(result.map((r) => (r.ok ? r.principal : null)));
  t.is(principals.size, 1, 'every caller gets the same entry');
  // Cached afterwards: no statement at all, and the answer is synchronous (no promise per request).
  t.is((await keyLoads(async () => credentials.resolve(key))).loads, 0);
  const cached = credentials.resolve(key);
  t.false(cached instanceof Promise);
  t.true(!(cached instanceof Promise) && cached.ok && cached.principal === [...principals][0]);
});

test.serial('a request after an invalidation never joins a load that started before it', async (t) => {
  const s = stack();
  const user = await createUser(s.db, { roles: ['role_developer'] });
  const { id, key } = await createKey({ userId: user.id, scopes: ['gps:read'] });
  const credentials = s.api.services.credentials;
  const { result, loads } = await keyLoads(async () => {
    const before = credentials.resolve(key);
    await s.db('api_keys').where('id', id).update({ is_active: false });
    credentials.invalidate({ apiKeyIds: [id] });
    const after = credentials.resolve(key);
    return Promise.all([before, after]);
  });
  t.is(loads, 2);
  t.false(result[1].ok, 'the request after the change sees the key switched off');
});

test.serial('an invalidation drops exactly its owner’s cached credentials, found by index', async (t) => {
  const s = stack();
  const credentials = s.api.services.credentials;
  const [a, b] = await Promise.all([
    createUser(s.db, { roles: ['role_developer'] }),
    createUser(s.db, { roles: ['role_developer'] }),
  ]);
  const [keyA, keyB] = await Promise.all([
    createKey({ userId: a.id, scopes: ['gps:read'] }),
    createKey({ userId: b.id, scopes: ['gps:read'] }),
  ]);
  const tokens = { a: a.token, b: b.token, keyA: keyA.key, keyB: keyB.key };
  // Which tokens are cached (answered without a promise); all of them are cached afterwards.
  const cached = async () => {
    const out: Record<string, boolean> = {};
    for (const [name, token] of Object.entries(tokens)) {
      const r = credentials.resolve(token);
      out[name] = !(r instanceof Promise);
      t.true((await r).ok, name);
    }
    return out;
  };
  await cached();
  const all = { a: true, b: true, keyA: true, keyB: true };
  t.deepEqual(await cached(), all);
  const before = credentials.cacheStats();
  const less = (entries: number, owners: number, indexed: number) => ({
    entries: before.entries - entries,
    owners: before.owners - owners,
    indexed: before.indexed - indexed,
  });

  // A user: their session and their key (a key acts for its owner) go; b's stay. A session is
  // indexed under its user, a key under its owner and itself.
  credentials.invalidate({ userIds: [a.id] });
  t.deepEqual(credentials.cacheStats(), less(2, 2, 3));
  t.deepEqual(await cached(), { ...all, a: false, keyA: false });
  t.deepEqual(credentials.cacheStats(), before);

  // One key by its id: its owner's session stays.
  credentials.invalidate({ apiKeyIds: [keyB.id] });
  t.deepEqual(credentials.cacheStats(), less(1, 1, 2));
  t.deepEqual(await cached(), { ...all, keyB: false });
  t.deepEqual(credentials.cacheStats(), before);

  // Everything: the index empties with the cache.
  credentials.invalidate({ all: true });
  t.deepEqual(credentials.cacheStats(), { entries: 0, owners: 0, indexed: 0 });
});

test.serial('first requests of many keys read their roles, bans and tracker links in one statement each', async (t) => {
  const s = stack();
  const credentials = s.api.services.credentials;
  const owners = await Promise.all(Array.from({ length: 12 }, () => createUser(s.db, { roles: ['role_developer'] })));
  const keys = await Promise.all(owners.map((o) => createKey({ userId: o.id, scopes: ['gps:write'] })));
  // One owner is banned: its key's entry must say so, the others' must not.
  await s.db('bans').insert({ user_id: owners[3].id, reason: 'probe', is_permanent: true, banned_at: new Date() });
  // Every other key is a tracker's: its device, and for one of them an active GPS-logging trip.
  const devices = await s
    .db('devices')
    .insert(keys.filter((_, i) => i % 2 === 0).map((k, i) => ({ name: `fleet ${i}`, api_key_id: k.id })))
    .returning(['id', 'api_key_id']);
  const [trip] = await s
    .db('trips')
    .insert({ name: 'fleet trip', status: 'active', gps_logging_enabled: true, device_id: devices[1].id, weight_kg: 1 })
    .returning('id');

  const seen: string[] = [];
  const listener = (q: { sql: string }) => seen.push(q.sql);
  s.db.on('query', listener);
  let results: Awaited<ReturnType<typeof credentials.resolve>>[];
  try {
    results = await Promise.all(keys.map((k) => credentials.resolve(k.key)));
  } finally {
    s.db.off('query', listener);
  }
  const on = (re: RegExp) => seen.filter((sql) => re.test(sql)).length;
  t.is(on(/from "api_key_roles"/), 1);
  t.is(on(/from "bans"/), 1);
  t.deepEqual(
    results.map((r) => r.ok),
    keys.map((_, i) => i !== 3),
  );
  const r3 = results[3];
  t.true(!r3.ok && r3.status === 403);

  const principals = results.flatMap((r) => (r.ok ? [r.principal] : []));
  seen.length = 0;
  s.db.on('query', listener);
  let links: Array<{ deviceId: string; tripId: string | null; tripStartedAt: number | null } | null>;
  try {
    links = await Promise.all(principals.map((p) => trackerLinkFor(s.db, p)));
  } finally {
    s.db.off('query', listener);
  }
  t.is(on(/from "devices"/), 1);
  const byKey = new Map(devices.map((d: { id: string; api_key_id: string }) => [d.api_key_id, d.id]));
  principals.forEach((p, i) => {
    const id = p.kind === 'apiKey' ? p.apiKeyId : '';
    const device = byKey.get(id);
    // The trip was written active without a started_at: no start to compare points with.
    t.deepEqual(
      links[i],
      device ? { deviceId: device, tripId: device === devices[1].id ? trip.id : null, tripStartedAt: null } : null,
    );
  });
});
