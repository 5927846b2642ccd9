import test from 'ava';
import { signAppAssertion } from '../../shared/auth/assertionVerifier';
import { createUser } from '../helpers/factories';
import { useStack } from '../helpers/stack';

const APP_SECRET = 'gql-audit-app-secret-0001';
const stack = useStack(test, { env: { ID_APPS: `idapp:${APP_SECRET}` } });

const MUTATION = `mutation($input: AuditEventInput!) { logAuditEvent(input: $input) { id userId eventType status sourceService } }`;
const CREATE = `mutation($input: AuditEventInput!) { createAuditEvent(input: $input) { id eventType } }`;
const gql = (query: string, input: unknown, opts: { token?: string; headers?: Record<string, string> } = {}) =>
  stack().request('POST', '/v1/gql', {
    token: opts.token,
    headers: opts.headers,
    body: { query, variables: { input } },
  });

test('the system key logs an audit event for a user through GraphQL', async (t) => {
  const s = stack();
  const user = await createUser(s.db);
  const r = await gql(
    MUTATION,
    { userId: user.id, eventType: 'logout', metadataJson: '{"reason":"user_initiated"}' },
    { token: s.systemKey },
  );
  t.falsy(r.body.errors, JSON.stringify(r.body.errors));
  t.is(r.body.data.logAuditEvent.userId, user.id);
  const row = await s.db('audit_events').where('id', r.body.data.logAuditEvent.id).first();
  t.deepEqual(row.metadata, { reason: 'user_initiated' });
  const c = await gql(CREATE, { eventType: 'bot_command_executed', sourceService: 'chat_bot' }, { token: s.systemKey });
  t.is(c.body.data.createAuditEvent.eventType, 'bot_command_executed');
});

test('the recorded event shows every field of the REST answer, in camelCase', async (t) => {
  const s = stack();
  const user = await createUser(s.db);
  const FULL = `mutation($input: AuditEventInput!) { createAuditEvent(input: $input) {
    id userId eventType resourceType resourceId actorId ipAddress userAgent description metadata status
    errorMessage countryCode countryName city region sourceService createdAt isReported } }`;
  const input = {
    userId: user.id,
    eventType: 'login',
    ipAddress: '10.1.2.3',
    userAgent: 'gql-test',
    metadataJson: '{"attempt":2}',
    status: 'failure',
    errorMessage: 'wrong password',
  };
  const r = await gql(FULL, input, { token: s.systemKey });
  t.falsy(r.body.errors, JSON.stringify(r.body.errors));
  const e = r.body.data.createAuditEvent;
  t.like(e, {
    userId: user.id,
    eventType: 'login',
    ipAddress: '10.1.2.3',
    userAgent: 'gql-test',
    metadata: { attempt: 2 },
    status: 'failure',
    errorMessage: 'wrong password',
    isReported: false,
  });
  t.deepEqual(
    Object.keys(e).sort(),
    FULL.match(/\b[a-z][A-Za-z]+\b/g)!
      .slice(3)
      .filter((k) => k !== 'input')
      .sort(),
  );
  // metadataJson nested past the body limit is refused by name (it was a 500 when serialised).
  const deep = await gql(
    CREATE,
    { eventType: 'login', metadataJson: `{"a":${'['.repeat(5000)}${']'.repeat(5000)}}` },
    { token: s.systemKey },
  );
  t.regex(deep.body.errors[0].message, /^metadataJson\.a\.0\.0: nested deeper than 64 levels/);
  t.is(deep.body.errors[0].extensions.code, 'BAD_USER_INPUT');
  // Its values are counted before it is parsed, as a body's are: one string of a body may hold
  // megabytes of tiny arrays (60,000 nested 30 deep took JSON.parse about a second).
  const many = await gql(
    CREATE,
    {
      eventType: 'login',
      metadataJson: `{"a":[${Array(60_000)
        .fill(`${'['.repeat(30)}${']'.repeat(30)}`)
        .join(',')}]}`,
    },
    { token: s.systemKey },
  );
  t.regex(many.body.errors[0].message, /^metadataJson: too many JSON values \(at most 50000 /);
  t.is(many.body.errors[0].extensions.code, 'BAD_USER_INPUT');
});

test('without audit:write: UNAUTHENTICATED anonymously, FORBIDDEN for a plain user', async (t) => {
  const s = stack();
  const anon = await gql(MUTATION, { eventType: 'login' });
  t.is(anon.body.errors[0].extensions.code, 'UNAUTHENTICATED');
  const user = await createUser(s.db);
  const denied = await gql(MUTATION, { eventType: 'login' }, { token: user.token });
  t.is(denied.body.errors[0].extensions.code, 'FORBIDDEN');
});

test('an internal app attributes an event to a user only with that user\u2019s assertion, once', async (t) => {
  const s = stack();
  const user = await createUser(s.db);
  const headers = { 'x-id-app-key': APP_SECRET };
  const missing = await gql(MUTATION, { userId: user.id, eventType: 'logout', sourceService: 'id' }, { headers });
  t.is(missing.body.errors[0].extensions.code, 'UNAUTHENTICATED');
  const assertion = signAppAssertion({ appId: 'idapp', secret: APP_SECRET, subject: user.id });
  const ok = await gql(
    MUTATION,
    { userId: user.id, eventType: 'logout', sourceService: 'id' },
    { headers: { ...headers, 'x-id-app-assertion': assertion } },
  );
  t.falsy(ok.body.errors, JSON.stringify(ok.body.errors));
  t.is(ok.body.data.logAuditEvent.sourceService, 'id');
  const replay = await gql(
    MUTATION,
    { userId: user.id, eventType: 'logout', sourceService: 'id' },
    { headers: { ...headers, 'x-id-app-assertion': assertion } },
  );
  t.is(replay.body.errors[0].extensions.code, 'UNAUTHENTICATED');
});

test('an internal app naming an end user as actorId needs that user\u2019s assertion', async (t) => {
  const s = stack();
  const user = await createUser(s.db);
  const other = await createUser(s.db);
  const headers = { 'x-id-app-key': APP_SECRET };
  const input = { actorId: user.id, eventType: 'password_changed', sourceService: 'id' };
  const vouching = (subject: string) => ({
    headers: { ...headers, 'x-id-app-assertion': signAppAssertion({ appId: 'idapp', secret: APP_SECRET, subject }) },
  });
  const missing = await gql(MUTATION, input, { headers });
  t.is(missing.body.errors[0].extensions.code, 'UNAUTHENTICATED');
  const wrong = await gql(CREATE, input, vouching(other.id));
  t.is(wrong.body.errors[0].extensions.code, 'UNAUTHENTICATED');
  const two = await gql(MUTATION, { ...input, userId: other.id }, vouching(user.id));
  t.is(two.body.errors[0].extensions.code, 'FORBIDDEN');
  const ok = await gql(CREATE, input, vouching(user.id));
  t.falsy(ok.body.errors, JSON.stringify(ok.body.errors));
  t.is((await s.db('audit_events').where('id', ok.body.data.createAuditEvent.id).first()).actor_id, user.id);
});

test('bad input is a BadRequest naming the field', async (t) => {
  const s = stack();
  const r = await gql(MUTATION, { eventType: 'made_up' }, { token: s.systemKey });
  t.is(r.body.errors[0].extensions.code, 'BAD_USER_INPUT');
  // Named as the GraphQL argument (the command behind REST says event_type).
  t.regex(r.body.errors[0].message, /^eventType: must be one of/);
  const unknown = await gql(
    MUTATION,
    { eventType: 'login', userId: '00000000-0000-4000-8000-000000000000' },
    { token: s.systemKey },
  );
  t.regex(unknown.body.errors[0].message, /^userId: unknown user/);
  const json = await gql(MUTATION, { eventType: 'login', metadataJson: '{nope' }, { token: s.systemKey });
  t.regex(json.body.errors[0].message, /metadataJson/);
});
