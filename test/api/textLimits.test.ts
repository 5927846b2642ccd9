import test from 'ava';
import { createUser } from '../helpers/factories';
import { useStack } from '../helpers/stack';

const stack = useStack(test, { env: { RATE_LIMIT_USER: '100000' } });
/** One code point, two UTF-16 units. */
const SHIP = '\u{1F6A2}';

interface Case {
  path: string;
  /** The body carrying `text` in the field under test. */
  body: (text: string) => Record<string, unknown>;
  /** The field as the 400 names it. */
  field: string;
  max: number;
}

let serial = 0;
const unique = (what: string) => `${what} ${process.pid} ${++serial}`;
const client = (extra: Record<string, unknown>) => ({
  name: unique('client'),
  redirect_uris: ['https://app.example.com/callback'],
  client_type: 'public',
  is_first_party: false,
  ...extra,
});

const CASES: Case[] = [
  { path: '/v1/devices', body: (v) => ({ name: unique('device'), device_type: v }), field: 'device_type', max: 100 },
  { path: '/v1/devices', body: (v) => ({ name: unique('device'), description: v }), field: 'description', max: 10_000 },
  { path: '/v1/locations', body: (v) => ({ name: unique('location'), street: v }), field: 'street', max: 255 },
  { path: '/v1/locations', body: (v) => ({ name: unique('location'), zip: v }), field: 'zip', max: 32 },
  { path: '/v1/locations', body: (v) => ({ name: unique('location'), city: v }), field: 'city', max: 255 },
  {
    path: '/v1/locations',
    body: (v) => ({ name: unique('location'), contacts: [{ name: 'Ann', phone: v }] }),
    field: 'contacts.0.phone',
    max: 64,
  },
  { path: '/v1/roles', body: (v) => ({ name: v }), field: 'name', max: 100 },
  { path: '/v1/roles', body: (v) => ({ name: unique('role'), description: v }), field: 'description', max: 2000 },
  { path: '/v1/api-keys', body: (v) => ({ name: v }), field: 'name', max: 100 },
  { path: '/v1/api-keys', body: (v) => ({ name: unique('key'), description: v }), field: 'description', max: 2000 },
  { path: '/v1/oauth/clients', body: (v) => client({ name: v }), field: 'name', max: 100 },
  { path: '/v1/oauth/clients', body: (v) => client({ description: v }), field: 'description', max: 2000 },
  { path: '/v1/trips', body: (v) => ({ name: unique('trip'), tags: [v] }), field: 'tags.0', max: 100 },
  { path: '/v1/trips', body: (v) => ({ name: unique('trip'), notes: v }), field: 'notes', max: 10_000 },
];

/** The documented schema of a JSON request body's top-level field. */
function documented(doc: any, path: string, field: string): { maxLength?: number; minLength?: number } {
  const resolve = (s: any): any => (s?.$ref ? resolve(doc.components.schemas[s.$ref.split('/').pop()]) : s);
  const body = resolve(doc.paths[path].post.requestBody.content['application/json'].schema);
  return resolve(body.properties[field]);
}

test('text limits count characters (code points) as documented: max emoji fit, one more is a 400 naming the field', async (t) => {
  const s = stack();
  const admin = await createUser(s.db, { roles: ['role_admin'] });
  const doc = (await s.request('GET', '/v1/openapi.json')).body;
  for (const c of CASES) {
    const where = `${c.path} ${c.field}`;
    if (!c.field.includes('.')) t.is(documented(doc, c.path, c.field).maxLength, c.max, where);
    const fits = await s.request('POST', c.path, { token: admin.token, body: c.body(SHIP.repeat(c.max)) });
    t.is(fits.status, 201, `${where}: ${fits.text.slice(0, 300)}`);
    const over = await s.request('POST', c.path, { token: admin.token, body: c.body(SHIP.repeat(c.max + 1)) });
    t.is(over.status, 400, where);
    t.is(over.body.message, `${c.field}: must be at most ${c.max} characters`, where);
  }
  // What was stored is what was sent, every emoji of it.
  const device = await s.db('devices').where('device_type', SHIP.repeat(100)).first('device_type');
  t.is(device?.device_type, SHIP.repeat(100));
});
