import test from 'ava';
import { Parser } from '@asyncapi/parser';
import { wsPushes } from '../../shared/wsMessages';
import { useStack } from '../helpers/stack';

const stack = useStack(test);

type Doc = {
  asyncapi: string;
  channels: Record<string, { address: string; description?: string; messages: Record<string, unknown> }>;
  operations: Record<string, { action: string }>;
  components: { messages: Record<string, { payload: any; contentType: string }>; schemas: Record<string, any> };
};

test('/v1/asyncapi.json is a valid AsyncAPI 3.0 document (@asyncapi/parser)', async (t) => {
  const r = await stack().request<Doc>('GET', '/v1/asyncapi.json');
  t.is(r.status, 200);
  t.is(r.body.asyncapi, '3.0.0');
  const parsed = await new Parser().parse(r.text);
  const problems = parsed.diagnostics.filter((d) => d.severity === 0).map((d) => `${d.path.join('.')}: ${d.message}`);
  t.deepEqual(problems, []);
  t.truthy(parsed.document);
  t.is(parsed.document!.channels().length, Object.keys(r.body.channels).length);
});

test('channels of spec §4.26 with access rules, every message both ways, the protobuf envelope', async (t) => {
  const doc = (await stack().request<Doc>('GET', '/v1/asyncapi.json')).body;
  const addresses = Object.values(doc.channels).map((c) => c.address);
  for (const a of [
    '/v1/ws',
    'user:{userId}',
    'admin:{topic}',
    'public:{topic}',
    'gps:{topic}',
    'geofence:{topic}',
    'vessels',
  ])
    t.true(addresses.includes(a), a);
  t.regex(doc.channels.gps.description ?? '', /gps:read/);
  t.regex(doc.channels.geofence.description ?? '', /geofences:read/);
  t.regex(doc.channels.admin.description ?? '', /admin:read/);
  t.regex(doc.channels.user.description ?? '', /API keys cannot/);
  // Every push the server types (ServerPush, via shared/wsMessages) is a documented message.
  for (const name of Object.keys(wsPushes)) {
    t.truthy(doc.components.messages[name], name);
    const schema = doc.components.schemas[`${name}Payload`];
    t.deepEqual(schema.properties.type, { type: 'string', enum: [name] });
  }
  for (const name of ['subscribe', 'unsubscribe', 'ping', 'pong', 'error']) t.truthy(doc.components.messages[name]);
  const sends = Object.entries(doc.operations)
    .filter(([, o]) => o.action === 'send')
    .map(([k]) => k);
  t.deepEqual(sends.sort(), ['send_ping', 'send_protobuf', 'send_subscribe', 'send_unsubscribe']);
  const env = doc.components.messages.protobufEnvelope;
  t.is(env.contentType, 'application/x-protobuf');
  t.regex(env.payload.schema, /message WsEnvelope/);
  // The gpsUpdate payload is the REST GpsPoint schema (one zod schema for both).
  t.is(
    JSON.stringify(doc.components.schemas.gpsUpdatePayload.properties.data),
    '{"$ref":"#/components/schemas/GpsPoint"}',
  );
});
