import test from 'ava';
import { geoLookup } from '../../shared/geoip';
import { createUser } from '../helpers/factories';
import { useStack } from '../helpers/stack';

const stack = useStack(test);

test('geo fields for a public address; empty for loopback and private ones', (t) => {
  const uk = geoLookup('81.2.69.142');
  t.is(uk.country_code, 'GB');
  t.is(uk.country_name, 'United Kingdom');
  t.truthy(uk.city);
  t.truthy(uk.region);
  t.is(geoLookup('::ffff:81.2.69.142').country_code, 'GB');
  t.is(geoLookup('2001:4860:4860::8888').country_code, 'US');
  const none = { country_code: null, country_name: null, city: null, region: null };
  for (const ip of ['127.0.0.1', '::1', '10.1.2.3', '192.168.0.7', '172.20.0.1', 'fe80::1', 'not an ip', null])
    t.deepEqual(geoLookup(ip), none, String(ip));
});

test('ingested events are resolved at write time from their ip_address', async (t) => {
  const s = stack();
  const admin = await createUser(s.db, { roles: ['role_admin'] });
  const post = (ip: string) =>
    s.request('POST', '/v1/internal/audit', {
      token: admin.token,
      body: { event_type: 'bot_command_executed', source_service: 'chat_bot', user_id: 'chat:42', ip_address: ip },
    });
  const pub = await post('81.2.69.142');
  t.is(pub.status, 201, pub.text);
  t.is(pub.body.data.country_code, 'GB');
  t.is(pub.body.data.country_name, 'United Kingdom');
  const local = await post('127.0.0.1');
  t.is(local.body.data.country_code, null);
  t.is(local.body.data.city, null);
  const row = await s.db('audit_events').where('id', pub.body.data.id).first();
  t.is(row.country_code, 'GB');
});
