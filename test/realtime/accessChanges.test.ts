import test, { type ExecutionContext } from 'ava';
import { createSession } from '../../shared/commands/sessions';
import { createKey, createOAuthToken, createUser } from '../helpers/factories';
import { useStack } from '../helpers/stack';
import { gpsBody } from '../helpers/tracking';
import { connect, publish, wsBase, type WsConn } from '../helpers/wsClient';
import { orAfter } from '../helpers/wait';

/**
 * An open socket holds no more access than a new request would: it closes when its credential
 * expires, and a push published after a narrowing change was acknowledged never reaches it, even
 * while the re-check of its access is still waiting on the database. Serial: two of the tests lock
 * the sessions table, which would hold up the others' session reads.
 */
const stack = useStack(test, { realtime: 1 });

const isGpsUpdate = (f: { kind: string; data?: { type?: string } }) =>
  f.kind === 'json' && f.data?.type === 'gpsUpdate';

/** A role of its own holding gps:read only, so taking it away takes exactly that. */
async function gpsViewerRole(roleId: string): Promise<void> {
  const s = stack();
  await s.db('roles').insert({ id: roleId, name: roleId, description: 'gps reader', is_system: false });
  const perm = await s.db('permissions').where({ resource: 'gps', action: 'read' }).first('id');
  await s.db('role_permissions').insert({ role_id: roleId, permission_id: perm.id });
}

async function closesWithin(conn: WsConn, ms: number): Promise<{ code: number; reason: string } | null> {
  return orAfter(conn.closed, ms, null);
}

test.serial('a socket on a ticket minted with an OAuth token closes as expired when the token expires', async (t) => {
  const s = stack();
  const user = await createUser(s.db, { roles: ['role_user', 'role_api_read_only'] });
  const oauth = await createOAuthToken(s.db, user.id, ['ws:ticket', 'gps:read']);
  await s
    .db('oauth_access_tokens')
    .where('id', oauth.tokenId)
    .update({ expires_at: new Date(Date.now() + 1500) });
  const minted = await s.request('POST', '/v1/ws/ticket', { token: oauth.token });
  t.is(minted.status, 201, minted.text);
  const conn = await connect(wsBase(s), { protocols: ['service-ticket', minted.body.ticket] });
  t.is((await conn.subscribe('gps')).data, 'Subscribed to gps');
  // Told apart from a revocation, as for sessions and API keys.
  t.deepEqual(await conn.closed, { code: 4001, reason: 'credentials expired' });
});

test.serial('a socket closes when the session, ticket or API key it was opened with expires', async (t) => {
  const s = stack();
  const user = await createUser(s.db, { roles: ['role_user', 'role_api_read_only'] });
  const soon = () => new Date(Date.now() + 1500);
  const { token } = await createSession(s.db, user.id, soon());
  const bySession = await connect(wsBase(s), { token });
  const ticket = (await s.request('POST', '/v1/ws/ticket', { token })).body.ticket as string;
  const byTicket = await connect(wsBase(s), { protocols: ['service-ticket', ticket] });
  const key = await createKey({ userId: user.id, scopes: ['gps:read'], expiresAt: soon() });
  const byKey = await connect(wsBase(s), { token: key.key });
  t.is((await byKey.subscribe('gps')).data, 'Subscribed to gps');
  // Open now, well before the expiry.
  t.is(await closesWithin(bySession, 200), null);
  for (const [what, conn] of [
    ['session', bySession],
    ['ticket', byTicket],
    ['API key', byKey],
  ] as const) {
    const closed = await closesWithin(conn, 10_000);
    t.truthy(closed, `${what}: still open after its credential expired`);
    t.is(closed?.code, 4001, what);
    t.regex(closed?.reason ?? '', /expired/, what);
  }
  // REST agrees.
  t.is((await s.request('GET', '/v1/users/me', { token })).status, 401);
});

/**
 * A user (with `roles`) whose socket reads `gps` loses `removed` through the API while the sessions
 * table is locked: the socket's re-check, which resolves its session token, waits. `during` runs
 * after the 204 and before the lock goes.
 */
async function removeRoleWhileRecheckWaits(
  t: ExecutionContext,
  roles: string[],
  removed: string,
  during: (conn: WsConn) => Promise<void>,
): Promise<WsConn> {
  const s = stack();
  const admin = await createUser(s.db, { roles: ['role_admin'] });
  const user = await createUser(s.db, { roles });
  const conn = await connect(wsBase(s), { token: user.token });
  t.is((await conn.subscribe('gps')).data, 'Subscribed to gps');
  // The admin's credential is cached, so the removal itself does not read the sessions table.
  t.is((await s.request('GET', '/v1/users/me', { token: admin.token })).status, 200);
  const lock = await s.db.transaction();
  try {
    await lock.raw('LOCK TABLE sessions IN ACCESS EXCLUSIVE MODE');
    const r = await s.request('DELETE', `/v1/users/${user.id}/roles/${removed}`, { token: admin.token });
    t.is(r.status, 204, r.text);
    await during(conn);
  } finally {
    await lock.commit();
  }
  return conn;
}

test.serial(
  'a demotion acknowledged while the re-check waits on the database: no later push reaches the socket',
  async (t) => {
    const s = stack();
    await gpsViewerRole('role_gps_viewer_a');
    // role_user alone does not read gps: the demotion takes gps:read away.
    const conn = await removeRoleWhileRecheckWaits(
      t,
      ['role_user', 'role_gps_viewer_a'],
      'role_gps_viewer_a',
      async (c) => {
        await publish(s, 'gps', { type: 'gpsUpdate', data: { id: 'after-demotion' } });
        t.true(await c.nothing(isGpsUpdate, 1000), 'a push published after the 204 reached the demoted socket');
      },
    );
    t.deepEqual(await conn.nextJson((m) => m.type === 'error'), {
      type: 'error',
      message: 'access to channel gps revoked',
    });
    // The held push was for a channel the socket lost: dropped, not delivered late.
    t.true(await conn.nothing(isGpsUpdate, 500));
    t.is(conn.ws.readyState, conn.ws.OPEN);
    conn.close();
  },
);

test.serial(
  'a change that leaves the access as it was: pushes held during the re-check arrive after it, in order',
  async (t) => {
    const s = stack();
    await gpsViewerRole('role_gps_viewer_b');
    await gpsViewerRole('role_gps_viewer_c');
    // gps:read stays (through role_gps_viewer_c).
    const roles = ['role_user', 'role_gps_viewer_b', 'role_gps_viewer_c'];
    const conn = await removeRoleWhileRecheckWaits(t, roles, 'role_gps_viewer_b', async (c) => {
      for (const id of ['p1', 'p2', 'p3']) await publish(s, 'gps', { type: 'gpsUpdate', data: { id } });
      t.true(await c.nothing(isGpsUpdate, 500), 'pushes went out before the re-check finished');
    });
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) ids.push((await conn.nextJson((m) => m.type === 'gpsUpdate')).data.id);
    t.deepEqual(ids, ['p1', 'p2', 'p3']);
    t.true(await conn.nothing((f) => f.kind === 'json' && f.data.type === 'error', 300));
    conn.close();
  },
);

test.serial(
  'requests sent after a demotion was acknowledged wait for the re-check and are judged by the narrowed access',
  async (t) => {
    await gpsViewerRole('role_gps_viewer_d');
    const s = stack();
    const conn = await removeRoleWhileRecheckWaits(
      t,
      ['role_user', 'role_gps_viewer_d'],
      'role_gps_viewer_d',
      async (c) => {
        // With the old access still on the socket this was confirmed at once.
        c.json({ type: 'subscribe', channel: 'gps:boat-1' });
        // (The user channel's rolesUpdated push is not held: only answers count here.)
        const answer = (f: { kind: string; data?: { type?: string } }) =>
          f.kind === 'json' && (f.data?.type === 'message' || f.data?.type === 'error');
        t.true(await c.nothing(answer, 500), 'a request was answered before the re-check finished');
      },
    );
    // In the order sent: the revocation of the channel it had, then the refusal of the new one.
    t.deepEqual(await conn.nextJson((m) => m.type === 'error' && /revoked/.test(m.message)), {
      type: 'error',
      message: 'access to channel gps revoked',
    });
    t.regex((await conn.nextJson((m) => m.type === 'error' && /gps:boat-1/.test(m.message))).message, /access denied/);
    await publish(s, 'gps:boat-1', { type: 'gpsUpdate', data: { id: 'x' } });
    t.true(await conn.nothing(isGpsUpdate, 500));
    conn.close();
  },
);

test.serial(
  'a protobuf request after the permission it needs was taken away is refused, and writes nothing',
  async (t) => {
    const s = stack();
    await s
      .db('roles')
      .insert({ id: 'role_audit_writer', name: 'role_audit_writer', description: 'x', is_system: false });
    const perm = await s.db('permissions').where({ resource: 'audit', action: 'write' }).first('id');
    await s.db('role_permissions').insert({ role_id: 'role_audit_writer', permission_id: perm.id });
    const description = `after the demotion ${Date.now()}`;
    const conn = await removeRoleWhileRecheckWaits(
      t,
      ['role_user', 'role_gps_viewer_a', 'role_audit_writer'],
      'role_audit_writer',
      async (c) => {
        c.envelope('createAuditEvent', { eventType: 'login', description }, 'r1');
        t.true(
          await c.nothing((f) => f.kind === 'binary', 500),
          'the request was handled before the re-check finished',
        );
      },
    );
    const answer = await conn.nextEnvelope((e) => e.requestId === 'r1' || e.payload === 'error', 10_000);
    t.is(answer.payload, 'error');
    t.like(answer.error, { code: 'forbidden' });
    await new Promise((r) => setTimeout(r, 500));
    t.is((await s.db('audit_events').where({ description })).length, 0);
    conn.close();
  },
);

test.serial('a revoked API key: its socket refuses every request until it closes, and gets no push', async (t) => {
  const s = stack();
  const admin = await createUser(s.db, { roles: ['role_admin'] });
  const key = (
    await s.request('POST', '/v1/api-keys', { token: admin.token, body: { name: 'reader', scopes: ['gps:read'] } })
  ).body;
  const conn = await connect(wsBase(s), { token: key.key });
  t.is((await conn.subscribe('gps')).data, 'Subscribed to gps');
  t.is((await s.request('DELETE', `/v1/api-keys/${key.id}`, { token: admin.token })).status, 204);
  t.is((await s.request('GET', '/v1/gps', { token: key.key })).status, 401);
  // Before the close: a new subscribe is refused, and a point posted now never reaches the socket.
  const again = await conn.subscribe('gps');
  t.is(again.type, 'error');
  t.regex(again.message, /^credentials no longer valid/);
  const posted = await s.request('POST', '/v1/gps', {
    token: admin.token,
    body: gpsBody(),
  });
  t.is(posted.status, 201, posted.text);
  t.true(await conn.nothing(isGpsUpdate, 300));
  t.is((await conn.closed).code, 4001);
});
