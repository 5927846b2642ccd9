import test from 'ava';
import { Model } from 'objection';
import { startApi } from '../../api/server';
import { createUser, TestUser } from '../helpers/factories';
import { FakePegel, startFakePegel } from '../helpers/fakePegel';
import { startSecondApi } from '../helpers/secondApi';
import { deleteKeysWithPrefix, Stack, startStack } from '../helpers/stack';
import { gpsBody, make } from '../helpers/tracking';

/**
 * Water-level stations (spec §4.10) against a local PEGELONLINE: mapping, the shared Redis cache
 * with one upstream request per query, 503s and stale answers when upstream fails, nearest lookups.
 * Serial: the tests count requests on one fake upstream.
 */
let fake: FakePegel;
let s: Stack;
let reader: TestUser;
let outsider: TestUser;

test.before(async () => {
  fake = await startFakePegel();
  s = await startStack({ env: { PEGEL_API_URL: fake.url, RATE_LIMIT_USER: '100000' } });
  reader = await createUser(s.db, { roles: ['role_developer'] });
  outsider = await createUser(s.db, { roles: ['role_user'] });
});
test.after.always(async () => {
  await s?.close();
  await fake?.close();
});
test.beforeEach(async () => {
  fake.failWith = 0;
  fake.delayMs = 0;
  fake.malformed = undefined;
  fake.requests.length = 0;
  await deleteKeysWithPrefix(s.config.redisUrl, `${s.config.redisPrefix}pegel:`);
});

const get = (path: string, token = reader.token) => s.request('GET', path, { token });

/** The key of the stamp stored with the answer under `entryKey`. */
const stampOf = (entryKey: string) => entryKey.replace(':pegel:stations:', ':pegel:stamp:');

/** Ages every cached answer (and its stamp) past its freshness, as if FRESH_SECONDS had gone by. */
async function ageCache(): Promise<void> {
  const keys = await s.redis.keys(`${s.config.redisPrefix}pegel:stations:*`);
  for (const k of keys) {
    const entry = JSON.parse((await s.redis.get(k))!);
    entry.fetched_at -= 3600_000;
    await s.redis.set(k, JSON.stringify(entry), 'KEEPTTL');
    await s.redis.set(stampOf(k), String(entry.fetched_at), 'KEEPTTL');
  }
}

test.serial(
  'stations: upstream stations mapped to spec §2, filtered by water; a second call is a cache hit',
  async (t) => {
    const first = await get('/v1/pegel/stations?water=rhein');
    t.is(first.status, 200, first.text);
    t.is(first.headers.get('x-cache'), 'miss');
    t.deepEqual(first.body.map((x: any) => x.shortname).sort(), ['BONN', 'KÖLN']);
    const koeln = first.body.find((x: any) => x.shortname === 'KÖLN');
    t.deepEqual(koeln, {
      station_id: 'a6ee8177-107b-47dd-bcfd-30960ccc6e9c',
      shortname: 'KÖLN',
      longname: 'KÖLN',
      water_shortname: 'RHEIN',
      water_longname: 'RHEIN',
      latitude: 50.93692537549045,
      longitude: 6.963300043278783,
      km: 688,
      agency: 'RHEIN',
      level_cm: 312,
      trend: 1,
    });
    t.is(fake.requests.length, 1);
    const q = fake.requests[0];
    t.is(q.get('includeTimeseries'), 'true');
    t.is(q.get('includeCurrentMeasurement'), 'true');
    t.is(q.get('waters'), 'RHEIN');

    const second = await get('/v1/pegel/stations?water=RHEIN');
    t.is(second.status, 200);
    t.is(second.headers.get('x-cache'), 'hit');
    t.deepEqual(second.body, first.body);
    t.is(fake.requests.length, 1, 'the second call did not reach upstream');

    const all = await get('/v1/pegel/stations');
    t.is(all.body.length, 4);
    t.false(fake.requests[1].has('waters'));
  },
);

test.serial('an answer is decoded once per fetch; one another instance stores is served at once', async (t) => {
  const first = await get('/v1/pegel/stations?water=RHEIN');
  t.is(first.headers.get('x-cache'), 'miss');
  const [key] = await s.redis.keys(`${s.config.redisPrefix}pegel:stations:*`);
  const entry = JSON.parse((await s.redis.get(key))!);
  t.is(await s.redis.get(stampOf(key)), String(entry.fetched_at), 'the stamp names the stored answer');

  // The stored bytes change under the same stamp: the process keeps what it decoded, it does not
  // read and parse the whole answer again on every lookup.
  const tampered = structuredClone(entry);
  for (const st of tampered.stations) st.level_cm = 999;
  await s.redis.set(key, JSON.stringify(tampered), 'KEEPTTL');
  const kept = await get('/v1/pegel/stations?water=RHEIN');
  t.is(kept.headers.get('x-cache'), 'hit');
  t.deepEqual(kept.body, first.body);

  // Another instance stores a newer answer (with its stamp, as fetchAndStore does): the next
  // lookup here serves it, without asking upstream.
  const newer = { ...structuredClone(entry), fetched_at: entry.fetched_at + 1 };
  for (const st of newer.stations) st.level_cm = 777;
  await s.redis.set(key, JSON.stringify(newer), 'KEEPTTL');
  await s.redis.set(stampOf(key), String(newer.fetched_at), 'KEEPTTL');
  const seen = await get('/v1/pegel/stations?water=RHEIN');
  t.is(seen.headers.get('x-cache'), 'hit');
  t.deepEqual(
    seen.body.map((x: any) => x.level_cm),
    first.body.map(() => 777),
  );
  const near = await get('/v1/pegel/nearest?lat=50.74&lon=7.10&water=rhein');
  t.is(near.body.data.level_cm, 777);
  t.is(fake.requests.length, 1);
});

test.serial('ten parallel cold calls on two api instances reach upstream once', async (t) => {
  const second = await startSecondApi(s);
  try {
    fake.delayMs = 300;
    const at = (url: string) =>
      fetch(`${url}/v1/pegel/stations?water=ALLER`, { headers: { authorization: `Bearer ${reader.token}` } }).then(
        async (r) => ({ status: r.status, body: (await r.json()) as any[] }),
      );
    const answers = await Promise.all([...Array(10)].map((_, i) => at(i % 2 ? second.url : s.url)));
    t.deepEqual(
      answers.map((a) => a.status),
      Array(10).fill(200),
    );
    for (const a of answers) t.is(a.body[0].shortname, 'EITZE');
    t.is(fake.requests.length, 1);
  } finally {
    await second.close();
  }
});

test.serial('upstream 500 without a cached answer: 503 {error, message}', async (t) => {
  fake.failWith = 500;
  const r = await get('/v1/pegel/stations');
  t.is(r.status, 503);
  t.is(r.body.error, 'ServiceUnavailable');
  t.regex(r.body.message, /water-level provider unavailable/);
});

test.serial('a slow upstream is cut off: 503 within 5 s', async (t) => {
  fake.delayMs = 8000;
  const started = Date.now();
  const r = await get('/v1/pegel/nearest?lat=50.7&lon=7.1');
  const took = Date.now() - started;
  t.is(r.status, 503);
  t.true(took < 5000, `took ${took} ms`);
});

test.serial('stale on error: an expired answer is served marked stale when upstream fails or hangs', async (t) => {
  t.is((await get('/v1/pegel/stations?water=SPREE')).headers.get('x-cache'), 'miss');
  await ageCache();
  fake.failWith = 500;
  const stale = await get('/v1/pegel/stations?water=SPREE');
  t.is(stale.status, 200);
  t.is(stale.headers.get('x-cache'), 'stale');
  t.regex(stale.headers.get('warning') ?? '', /^110 /);
  t.is(stale.body[0].shortname, 'BERLIN-MÜHLENDAMM UP');

  fake.failWith = 0;
  fake.delayMs = 8000;
  const started = Date.now();
  const slow = await get('/v1/pegel/stations?water=SPREE');
  t.true(Date.now() - started < 5000);
  t.is(slow.headers.get('x-cache'), 'stale');

  // An answer of which no station parses is malformed: the good answer is served stale and kept,
  // not replaced by an empty list cached as fresh.
  fake.delayMs = 0;
  fake.malformed = [{ foo: 1 }, 2, 'x'];
  for (let i = 0; i < 2; i++) {
    const bad = await get('/v1/pegel/stations?water=SPREE');
    t.is(bad.headers.get('x-cache'), 'stale');
    t.is(bad.body[0].shortname, 'BERLIN-MÜHLENDAMM UP');
  }
  // Without a kept answer it is a 503, as an upstream error is.
  const uncached = await get('/v1/pegel/stations?water=ELBE');
  t.is(uncached.status, 503, uncached.text);
  t.regex(uncached.body.message, /water-level provider unavailable/);
  fake.malformed = undefined;

  // Upstream back: a fresh answer replaces the stale one.
  const fresh = await get('/v1/pegel/stations?water=SPREE');
  t.is(fresh.headers.get('x-cache'), 'miss');
});

test.serial('trend: from the measurement when given, else from the previous reading', async (t) => {
  const bonn = async () => (await get('/v1/pegel/stations?water=RHEIN')).body.find((x: any) => x.shortname === 'BONN');
  t.is((await bonn()).trend, 0, 'no trend upstream and no earlier reading');
  fake.stations.find((x) => x.shortname === 'BONN')!.level = 295;
  await ageCache();
  const after = await bonn();
  t.is(after.level_cm, 295);
  t.is(after.trend, 1);
  fake.stations.find((x) => x.shortname === 'BONN')!.level = 287;
});

test.serial('nearest: by lat/lon, on a water, within a radius; 404 when none qualifies', async (t) => {
  const near = await get('/v1/pegel/nearest?lat=50.74&lon=7.10');
  t.is(near.status, 200, near.text);
  t.is(near.body.data.shortname, 'BONN');
  t.true(near.body.data.distance_km > 0.3 && near.body.data.distance_km < 0.8, String(near.body.data.distance_km));
  t.is(near.body.data.level_cm, 287);
  // The link names this search, not the one without a position (which starts from the latest point).
  t.is(near.body._links.self, '/v1/pegel/nearest?lat=50.74&lon=7.10');

  const onAller = await get('/v1/pegel/nearest?lat=50.74&lon=7.10&water=aller');
  t.is(onAller.body.data.shortname, 'EITZE');
  t.true(onAller.body.data.distance_km > 200);

  fake.requests.length = 0;
  const inRadius = await get('/v1/pegel/nearest?lat=50.90&lon=6.95&radius=10');
  t.is(inRadius.body.data.shortname, 'KÖLN');
  const q = fake.requests[0];
  t.is(q.get('latitude'), '50.9');
  t.is(q.get('longitude'), '6.95');
  t.is(q.get('radius'), '10');

  const none = await get('/v1/pegel/nearest?lat=48.0&lon=11.0&radius=5');
  t.is(none.status, 404);
  t.is(none.body.error, 'NotFound');
  t.truthy(none.body.message);
  t.is((await get('/v1/pegel/nearest?lat=50.74&lon=7.10&water=DONAU')).status, 404);

  const half = await get('/v1/pegel/nearest?lat=50.74');
  t.is(half.status, 400);
  t.regex(half.body.message, /^lon: /);
  t.is((await get('/v1/pegel/nearest?lat=91&lon=0')).status, 400);
  t.regex((await get('/v1/pegel/nearest?lat=50&lon=7&radius=-1')).body.message, /^radius: /);
  // Plain decimals only: no hex, exponent or empty value (Number() would read 0x32 as 50, '' as 0).
  for (const query of ['lat=0x32&lon=7', 'lat=5e1&lon=7', 'lat=&lon=7', 'lat=50&lon=7&radius=1e1']) {
    const r = await get(`/v1/pegel/nearest?${query}`);
    t.is(r.status, 400, query);
    t.regex(r.body.message, /^(lat|radius): must be a number/, query);
  }
  t.is((await get('/v1/pegel/nearest?lat=50.74&lon=.5e0')).status, 400);
  t.not((await get('/v1/pegel/nearest?lat=50.74&lon=7.&radius=.5')).status, 400);
});

test.serial('nearest without lat/lon searches from the latest GPS point', async (t) => {
  await make(s, reader.token, '/v1/gps', gpsBody({ latitude: 52.514, longitude: 13.41, device_id: 'pegel-boat' }));
  const r = await get('/v1/pegel/nearest');
  t.is(r.status, 200, r.text);
  t.is(r.body.data.shortname, 'BERLIN-MÜHLENDAMM UP');
  t.true(r.body.data.distance_km < 1);
});

test.serial('pegel:read is required', async (t) => {
  t.is((await s.request('GET', '/v1/pegel/stations')).status, 401);
  const r = await get('/v1/pegel/stations', outsider.token);
  t.is(r.status, 403);
  t.is((await get('/v1/pegel/nearest?lat=1&lon=1', outsider.token)).status, 403);
  t.is(fake.requests.length, 0);
});

test.serial('without PEGEL_API_URL both endpoints answer 503 "water-level provider not configured"', async (t) => {
  const api = await startApi({ ...s.config, pegelApiUrl: undefined }, { port: 0, drainIdleGraceMs: 0 });
  Model.knex(s.db);
  try {
    for (const path of ['/v1/pegel/stations', '/v1/pegel/nearest?lat=50&lon=7']) {
      const res = await fetch(`http://127.0.0.1:${api.port}${path}`, {
        headers: { authorization: `Bearer ${reader.token}` },
      });
      t.is(res.status, 503);
      const body = (await res.json()) as { error: string; message: string };
      t.is(body.error, 'ServiceUnavailable');
      t.is(body.message, 'water-level provider not configured');
    }
  } finally {
    await api.close();
    Model.knex(s.db);
  }
});
