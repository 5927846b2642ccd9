import test from 'ava';
import { createUser } from '../helpers/factories';
import { useStack } from '../helpers/stack';
import { fewestStatements } from '../helpers/statements';
import { make } from '../helpers/tracking';

/**
 * README "Hot paths": a write whose row carries its references is one statement. The foreign keys
 * check the references in that statement (a missing one is a 400 naming the field, and nothing is
 * written), the trip default comes from the process's config cache, and a new device without a
 * tracker key needs no transaction. Every test is serial, so the stack's knex 'query' events count
 * only its own requests; each write is measured three times and the fewest counts, so a poll of the
 * outbox relay landing in one window is not charged to it.
 */
const stack = useStack(test, { env: { RATE_LIMIT_USER: '100000' } });
const MISSING = '00000000-0000-4000-8000-000000000000';

async function fewest(send: () => Promise<{ status: number; text: string }>, expect: number) {
  return fewestStatements(stack(), async () => {
    const r = await send();
    if (r.status !== expect) throw new Error(`answered ${r.status}: ${r.text}`);
  });
}

test.serial(
  'creates of trips, templates (with references), devices, locations and geofences: one statement each',
  async (t) => {
    const s = stack();
    const developer = await createUser(s.db, { roles: ['role_developer'] });
    const token = developer.token;
    const device = await make(s, token, '/v1/devices', { name: 'referenced' });
    const place = await make(s, token, '/v1/locations', { name: 'Harbour', latitude: 53.5, longitude: 9.9 });
    const category = await make(s, token, '/v1/trip-categories', { name: 'Cargo' });
    const refs = { device_id: device.id, origin_id: place.id, destination_id: place.id, category_id: category.id };
    // Warm: the credential and the trip defaults are cached from here on.
    await make(s, token, '/v1/trips', { name: 'warm', ...refs });

    t.is(await fewest(() => s.request('POST', '/v1/trips', { token, body: { name: 'one', ...refs } }), 201), 1);
    t.is(
      await fewest(() => s.request('POST', '/v1/trip-templates', { token, body: { name: 'one', ...refs } }), 201),
      1,
    );
    t.is(await fewest(() => s.request('POST', '/v1/devices', { token, body: { name: 'plain' } }), 201), 1);
    t.is(await fewest(() => s.request('POST', '/v1/locations', { token, body: { name: 'Pier' } }), 201), 1);
    const fence = { name: 'Fence', latitude: 53.5, longitude: 9.9, radius_km: 1 };
    t.is(await fewest(() => s.request('POST', '/v1/geofences', { token, body: fence }), 201), 1);
    // The location's batched read (404 when missing), then the INSERT.
    const contact = () => s.request('POST', `/v1/locations/${place.id}/contacts`, { token, body: { name: 'Mia' } });
    t.is(await fewest(contact, 201), 2);

    const trip = await s.request('POST', '/v1/trips', { token, body: { name: 'stored', ...refs } });
    t.like(trip.body.data, { ...refs, status: 'draft', gps_logging_enabled: false });
    const read = await s.request('GET', `/v1/trips/${trip.body.data.id}`, { token });
    t.like(read.body.data, refs);
  },
);

test.serial('a missing reference is a 400 naming the field and what it points to, and writes nothing', async (t) => {
  const s = stack();
  const developer = await createUser(s.db, { roles: ['role_developer'] });
  const token = developer.token;
  const nouns = {
    device_id: 'device',
    origin_id: 'location',
    destination_id: 'location',
    category_id: 'trip category',
  };
  for (const [field, noun] of Object.entries(nouns)) {
    for (const path of ['/v1/trips', '/v1/trip-templates']) {
      const name = `missing ${field} ${path}`;
      const r = await s.request('POST', path, { token, body: { name, [field]: MISSING } });
      t.is(r.status, 400, `${path} ${field}`);
      t.is(r.body.error, 'BadRequest');
      t.is(r.body.message, `${field}: no such ${noun}`);
      const table = path === '/v1/trips' ? 'trips' : 'trip_templates';
      t.is(Number((await s.db(table).where('name', name).count({ n: '*' }))[0].n), 0);
    }
  }
  // A device's tracker key is still checked (and locked) in its transaction.
  const key = await s.request('POST', '/v1/devices', { token, body: { name: 'keyed', api_key_id: MISSING } });
  t.is(key.status, 400);
  t.regex(key.body.message, /^api_key_id: no such API key/);
});

test.serial(
  'concurrent POST /v1/trips: each 201 is its own stored trip; a missing reference fails only its own',
  async (t) => {
    const s = stack();
    const developer = await createUser(s.db, { roles: ['role_developer'] });
    const token = developer.token;
    const answers = await Promise.all(
      Array.from({ length: 12 }, (_, i) =>
        s.request('POST', '/v1/trips', {
          token,
          body:
            i === 5
              ? { name: `burst-${i}`, category_id: MISSING }
              : { name: `burst-${i}`, weight_kg: i, tags: [`t${i}`] },
        }),
      ),
    );
    for (const [i, r] of answers.entries()) {
      if (i === 5) {
        t.is(r.status, 400);
        t.is(r.body.message, 'category_id: no such trip category');
        continue;
      }
      t.is(r.status, 201, r.text);
      t.like(r.body.data, { name: `burst-${i}`, weight_kg: i, tags: [`t${i}`], status: 'draft' });
      const read = await s.request('GET', `/v1/trips/${r.body.data.id}`, { token });
      t.like(read.body.data, r.body.data); // GET adds the track stats
    }
    t.is(Number((await s.db('trips').where('name', 'burst-5').count({ n: '*' }))[0].n), 0);
  },
);

test.serial('a PATCH of plain fields is one UPDATE; unknown ids are 404 and missing references 400', async (t) => {
  const s = stack();
  const developer = await createUser(s.db, { roles: ['role_developer'] });
  const token = developer.token;
  const trip = await make(s, token, '/v1/trips', { name: 'patched', notes: 'before' });
  const device = await make(s, token, '/v1/devices', { name: 'patched device' });
  const patch = (path: string, body: unknown) => s.request('PATCH', path, { token, body });

  t.is(await fewest(() => patch(`/v1/trips/${trip.id}`, { notes: 'after' }), 200), 1);
  t.is(await fewest(() => patch(`/v1/devices/${device.id}`, { description: 'moved' }), 200), 1);

  const read = await s.request('GET', `/v1/trips/${trip.id}`, { token });
  t.like(read.body.data, { name: 'patched', notes: 'after', status: 'draft' });
  t.true(new Date(read.body.data.updated_at).getTime() >= new Date(trip.updated_at).getTime());
  const dev = await s.request('GET', `/v1/devices/${device.id}`, { token });
  t.like(dev.body.data, { name: 'patched device', description: 'moved' });

  t.is((await patch(`/v1/trips/${MISSING}`, { notes: 'x' })).status, 404);
  t.is((await patch(`/v1/devices/${MISSING}`, { name: 'x' })).status, 404);
  const bad = await patch(`/v1/trips/${trip.id}`, { category_id: MISSING });
  t.is(bad.status, 400);
  t.is(bad.body.message, 'category_id: no such trip category');
  t.like((await s.request('GET', `/v1/trips/${trip.id}`, { token })).body.data, { category_id: null, notes: 'after' });
});
