import test from 'ava';
import { ChatBotClient } from '../../shared/proto/rpc';
import { createKey, createUser } from '../helpers/factories';
import { useStack } from '../helpers/stack';
import { connect, wire, wsBase, WsConn } from '../helpers/wsClient';
import { eventually } from '../helpers/wait';

/** Signed-in users here read tracking data: the default User role alone is self-service only. */
const READER = ['role_user', 'role_api_read_only'];

// Workers run in-process: audit and settings requests go through the realtimeRequests queue.
const stack = useStack(test, { realtime: 2, workers: true });

async function audit(conn: WsConn, body: Record<string, unknown>, requestId: string) {
  conn.envelope('createAuditEvent', body, requestId);
  return conn.nextEnvelope((e) => e.requestId === requestId, 10_000);
}

test('audit request over protobuf: queued, written by a worker, answered with CreateAuditEventResponse (101)', async (t) => {
  const s = stack();
  const user = await createUser(s.db, { roles: READER });
  const svc = await connect(wsBase(s, 0), { token: s.systemKey });
  // Hand-built request: user_id(1), event_type(2), metadata_json(9), status(10), source_service(12).
  const req = Buffer.concat([
    Buffer.from([0x0a, user.id.length]),
    Buffer.from(user.id),
    Buffer.from([0x12, 'bot_command_executed'.length]),
    Buffer.from('bot_command_executed'),
    Buffer.from([0x4a, '{"command":"ping"}'.length]),
    Buffer.from('{"command":"ping"}'),
    Buffer.from([0x52, 7]),
    Buffer.from('success'),
    Buffer.from([0x62, 8]),
    Buffer.from('chat_bot'),
  ]);
  // WsEnvelope{type=100, request_id="a1", create_audit_event(100)=req}; tag of field 100 = 0xa2 0x06.
  svc.ws.send(Buffer.concat([Buffer.from([0x08, 0x64, 0x12, 0x02, 0x61, 0x31, 0xa2, 0x06, req.length]), req]));
  const f = (await svc.next((x) => x.kind === 'binary', 10_000)) as any;
  const w = wire(f.raw);
  t.is(w.get(1)![0], 101);
  t.is((w.get(2)![0] as Buffer).toString(), 'a1');
  const resp = wire(w.get(101)![0] as Buffer);
  t.is(resp.get(1)![0], 1);
  t.false(resp.has(3));
  const id = (resp.get(2)![0] as Buffer).toString();
  const row = await s.db('audit_events').where('id', id).first();
  t.like(row, {
    user_id: user.id,
    event_type: 'bot_command_executed',
    status: 'success',
    source_service: 'chat_bot',
    metadata: { command: 'ping' },
  });
  svc.close();
});

test('audit request validation follows POST /v1/internal/audit', async (t) => {
  const s = stack();
  const user = await createUser(s.db, { roles: READER });
  const svc = await connect(wsBase(s, 1), { token: s.systemKey, headers: { 'x-source-service': 'stream_bot' } });
  const unknown = '00000000-0000-4000-8000-000000000000';
  t.like(
    (await audit(svc, { userId: unknown, eventType: 'login', sourceService: 'api' }, 'v1')).createAuditEventResponse,
    { success: false, error: 'user_id: unknown user' },
  );
  // Bots may use external ids; the connection's X-Source-Service is the default source.
  const ext = await audit(svc, { userId: '987654321', eventType: 'bot_command_executed' }, 'v2');
  t.true((ext.createAuditEventResponse as any).success);
  t.like(
    await s
      .db('audit_events')
      .where('id', (ext.createAuditEventResponse as any).auditEventId)
      .first(),
    { user_id: '987654321', source_service: 'stream_bot' },
  );
  // Empty user_id: a system event.
  const sys = await audit(
    svc,
    { eventType: 'bot_guild_configured', sourceService: 'chat_bot', status: 'failure', errorMessage: 'boom' },
    'v3',
  );
  t.like(
    await s
      .db('audit_events')
      .where('id', (sys.createAuditEventResponse as any).auditEventId)
      .first(),
    { user_id: null, status: 'failure', error_message: 'boom' },
  );
  t.like((await audit(svc, { userId: user.id, eventType: 'login', actorId: unknown }, 'v4')).createAuditEventResponse, {
    success: false,
    error: 'actor_id: unknown user',
  });
  t.like((await audit(svc, { eventType: 'made_up' }, 'v5')).createAuditEventResponse, { success: false });
  t.like((await audit(svc, { eventType: 'login', metadataJson: '[1,2]' }, 'v6')).createAuditEventResponse, {
    success: false,
    error: 'metadata_json: must encode a JSON object',
  });
  // The body rule of POST /v1/internal/audit: 1e400 is refused, not stored as null.
  t.like((await audit(svc, { eventType: 'login', metadataJson: '{"a":1e400}' }, 'v6b')).createAuditEventResponse, {
    success: false,
    error: 'metadata_json.a: number too large (beyond ±1.8e308)',
  });
  // A string field whose bytes are not UTF-8 is refused, not stored with U+FFFD: event_type(2)
  // "login", description(8) FF FE 41.
  const bad = Buffer.from([0x12, 0x05, ...Buffer.from('login'), 0x42, 0x03, 0xff, 0xfe, 0x41]);
  svc.ws.send(Buffer.concat([Buffer.from([0x08, 0x64, 0x12, 0x02, 0x75, 0x38, 0xa2, 0x06, bad.length]), bad]));
  const refused = await svc.nextEnvelope((e) => e.payload === 'error', 10_000);
  t.regex((refused.error as { message: string }).message, /not valid UTF-8/);
  const [{ n }] = await s.db('audit_events').whereRaw('description LIKE ?', ['%\uFFFD%']).count({ n: '*' });
  t.is(Number(n), 0);
  t.like((await audit(svc, { eventType: 'login', status: 'maybe' }, 'v7')).createAuditEventResponse, {
    success: false,
    error: 'status: must be success or failure',
  });
  t.like((await audit(svc, { eventType: 'login', sourceService: 'toaster' }, 'v8')).createAuditEventResponse, {
    success: false,
  });
  const long = (await audit(svc, { eventType: 'login', description: 'x'.repeat(4001) }, 'v9'))
    .createAuditEventResponse as any;
  t.false(long.success);
  t.regex(long.error, /^description: /);
  svc.close();
});

test('audit requests need audit:write: an API key with it may, a plain user or key may not', async (t) => {
  const s = stack();
  const admin = await createUser(s.db, { roles: ['role_admin'] });
  const writerKey = await createKey({ userId: admin.id, scopes: ['audit:write'] });
  const k = await connect(wsBase(s, 0), { token: writerKey.key });
  t.true(((await audit(k, { eventType: 'login', userId: admin.id }, 'k1')).createAuditEventResponse as any).success);
  k.close();
  const user = await createUser(s.db, { roles: READER });
  const u = await connect(wsBase(s, 0), { token: user.token });
  const denied = await audit(u, { eventType: 'login' }, 'u1');
  t.deepEqual(denied.error, { message: 'missing permission audit:write', code: 'forbidden' });
  u.close();
});

test('chat settings (120/121): get, update global, update guild; permissions chat:read / chat:edit', async (t) => {
  const s = stack();
  const bot = await connect(wsBase(s, 0), { token: s.systemKey, headers: { 'x-source-service': 'chat_bot' } });
  const ask = async (body: Record<string, unknown>, id: string) => {
    bot.envelope('chatSettingsRequest', body, id);
    return (await bot.nextEnvelope((e) => e.requestId === id, 10_000)).chatSettingsResponse as any;
  };
  const got = await ask({}, 'g1');
  t.true(got.success);
  // The same UUID the REST route answers as the settings' id (spec §2 ids are UUIDs).
  t.is(got.global.id, (await s.db('chat_bot_settings').first('public_id')).public_id);
  t.like(got.global, {
    autoSyncEnabled: true,
    syncIntervalSeconds: 3600,
    initialDelaySeconds: 30,
    defaultLanguage: 'en',
    notifyOnGuildJoin: true,
    notifyOnGuildLeave: true,
    commandCooldownSeconds: 3,
  });
  const upd = await ask(
    {
      action: 'CHAT_SETTINGS_UPDATE_GLOBAL',
      globalPatch: { syncIntervalSeconds: 600, notifyOnGuildJoin: false, defaultLanguage: 'de' },
    },
    'g2',
  );
  t.true(upd.success);
  t.like(upd.global, { syncIntervalSeconds: 600, defaultLanguage: 'de', autoSyncEnabled: true });
  t.is(upd.global.notifyOnGuildJoin, false);
  t.like(await s.db('chat_bot_settings').first(), {
    sync_interval_seconds: 600,
    notify_on_guild_join: false,
    default_language: 'de',
  });
  t.like(await ask({ action: 'CHAT_SETTINGS_UPDATE_GLOBAL', globalPatch: { syncIntervalSeconds: 5 } }, 'g3'), {
    success: false,
    error: 'sync_interval_seconds: must be an integer from 60 to 86400',
  });
  t.like(await ask({ action: 'CHAT_SETTINGS_UPDATE_GLOBAL', globalPatch: {} }, 'g4'), {
    success: false,
    error: 'global_patch: at least one field is required',
  });

  const guild = await ask(
    { action: 'CHAT_SETTINGS_UPDATE_GUILD', guildId: '112233445566', guildDefaultLanguage: 'en' },
    'g5',
  );
  t.deepEqual(guild.guild, { guildId: '112233445566', defaultLanguage: 'en', effectiveLanguage: 'en' });
  const cleared = await ask({ action: 'CHAT_SETTINGS_UPDATE_GUILD', guildId: '112233445566' }, 'g6');
  t.deepEqual(cleared.guild, { guildId: '112233445566', effectiveLanguage: 'de' });
  t.is(
    (await s.db('audit_events').where({ event_type: 'bot_guild_configured', resource_id: '112233445566' })).length,
    2,
  );
  t.like(await ask({ action: 'CHAT_SETTINGS_UPDATE_GUILD', guildId: 'abc' }, 'g7'), {
    success: false,
    error: 'guild_id: must be a snowflake (digits)',
  });
  t.like(await ask({ action: 'CHAT_SETTINGS_UPDATE_GUILD', guildId: '1', guildDefaultLanguage: 'xx' }, 'g8'), {
    success: false,
  });
  bot.close();

  const mod = await createUser(s.db, { roles: ['role_moderator'] });
  const readKey = await createKey({ userId: mod.id, scopes: ['chat:read'] });
  const k = await connect(wsBase(s, 1), { token: readKey.key });
  k.envelope('chatSettingsRequest', { guildId: '112233445566' }, 'r1');
  t.like((await k.nextEnvelope((e) => e.requestId === 'r1', 10_000)).chatSettingsResponse, {
    success: true,
    guild: { guildId: '112233445566', effectiveLanguage: 'de' },
  });
  k.envelope(
    'chatSettingsRequest',
    { action: 'CHAT_SETTINGS_UPDATE_GLOBAL', globalPatch: { autoSyncEnabled: false } },
    'r2',
  );
  t.deepEqual((await k.nextEnvelope((e) => e.requestId === 'r2')).error, {
    message: 'missing permission chat:edit',
    code: 'forbidden',
  });
  k.close();
});

test.serial(
  'chat sync (110/111) and moderation (140/141) are relayed to the chat bot on another instance and answered',
  async (t) => {
    const s = stack();
    const bot = await connect(wsBase(s, 1), { token: s.systemKey, headers: { 'x-source-service': 'chat_bot' } });
    await eventually(
      async () =>
        JSON.parse((await s.redis.hget(`${s.config.redisPrefix}ws:stats`, s.realtime[1].instanceId)) ?? '{}')
          .chatBots === 1,
    );
    const mod = await createUser(s.db, { roles: ['role_moderator'] });
    const requester = await connect(wsBase(s, 0), { token: mod.token });

    requester.envelope('chatSyncRequest', { guildId: '42' }, 'sync-1');
    const toBot = await bot.nextEnvelope((e) => e.type === 'CHAT_SYNC_REQUEST');
    t.deepEqual(toBot.chatSyncRequest, { guildId: '42' });
    t.truthy(toBot.requestId);
    t.not(toBot.requestId, 'sync-1'); // the server's own correlation id
    bot.envelope(
      'chatSyncResponse',
      {
        success: true,
        guildsSynced: 1,
        channelsSynced: 2,
        rolesSynced: 3,
        guilds: [{ guildId: '42', name: 'Harbour', memberCount: 10, premiumTier: 2 }],
        channels: [{ channelId: '7', guildId: '42', name: 'general', channelTypeRaw: 0 }],
      },
      toBot.requestId,
    );
    const answer = await requester.nextEnvelope((e) => e.requestId === 'sync-1', 10_000);
    t.is(answer.type, 'CHAT_SYNC_RESPONSE');
    t.like(answer.chatSyncResponse, {
      success: true,
      guildsSynced: 1,
      channelsSynced: 2,
      rolesSynced: 3,
      guilds: [{ guildId: '42', name: 'Harbour', memberCount: 10, premiumTier: 2 }],
    });

    // Moderation: the actor is the requesting user, whatever the client claims.
    requester.envelope(
      'moderationRequest',
      {
        guildId: '42',
        userId: '555',
        action: 'MODERATION_TIMEOUT',
        durationSeconds: 600,
        reason: 'spam',
        actorId: 'someone-else',
      },
      'mod-1',
    );
    const modReq = await bot.nextEnvelope((e) => e.type === 'MODERATION_REQUEST');
    t.deepEqual(modReq.moderationRequest, {
      guildId: '42',
      userId: '555',
      action: 'MODERATION_TIMEOUT',
      durationSeconds: 600,
      reason: 'spam',
      actorId: mod.id,
    });
    bot.envelope(
      'moderationResponse',
      { success: true, guildId: '42', userId: '555', action: 'MODERATION_TIMEOUT' },
      modReq.requestId,
    );
    t.like((await requester.nextEnvelope((e) => e.requestId === 'mod-1', 10_000)).moderationResponse, {
      success: true,
      guildId: '42',
      userId: '555',
      action: 'MODERATION_TIMEOUT',
    });

    // Only a chat bot answers; an answer without a pending request is refused.
    requester.envelope('chatSyncResponse', { success: true }, 'x');
    t.deepEqual((await requester.nextEnvelope((e) => e.requestId === 'x')).error, {
      message: 'only a chat bot connection answers chat requests',
      code: 'forbidden',
    });
    bot.envelope('chatSyncResponse', { success: true }, 'nope');
    t.deepEqual((await bot.nextEnvelope((e) => e.requestId === 'nope')).error, {
      message: 'no pending request with this request_id',
      code: 'not_found',
    });

    // A user without chat:sync may not ask.
    const plain = await createUser(s.db, { roles: READER });
    const p = await connect(wsBase(s, 0), { token: plain.token });
    p.envelope('chatSyncRequest', {}, 'p1');
    t.deepEqual((await p.nextEnvelope()).error, { message: 'missing permission chat:sync', code: 'forbidden' });
    p.close();

    // If the bot goes away mid-request, the requester hears so at once.
    requester.envelope('chatSyncRequest', { scope: 'CHAT_SYNC_SCOPE_MEMBERS', guildId: '42' }, 'sync-2');
    await bot.nextEnvelope((e) => e.type === 'CHAT_SYNC_REQUEST');
    bot.close();
    t.like((await requester.nextEnvelope((e) => e.requestId === 'sync-2', 10_000)).chatSyncResponse, {
      error: 'the chat bot disconnected',
    });
    requester.close();
  },
);

test.serial('other processes reach the chat bot through ChatBotClient (as POST /v1/chat/sync will)', async (t) => {
  const s = stack();
  await eventually(() => s.realtime.every((r) => r.stats().chatBots === 0));
  await eventually(async () =>
    Object.values(await s.redis.hgetall(`${s.config.redisPrefix}ws:stats`)).every((v) => !JSON.parse(v).chatBots),
  );
  const client = new ChatBotClient(s.redis, s.config);
  t.like(await client.call({ payload: 'chatSyncRequest', body: {} }, 1000), {
    success: false,
    error: 'no chat bot is connected',
  });

  const bot = await connect(wsBase(s, 0), { token: s.systemKey, headers: { 'x-source-service': 'chat_bot' } });
  bot.ws.on('message', () => undefined);
  await eventually(
    async () =>
      JSON.parse((await s.redis.hget(`${s.config.redisPrefix}ws:stats`, s.realtime[0].instanceId)) ?? '{}').chatBots ===
      1,
  );
  const pending = client.call({ payload: 'chatSyncRequest', body: { guildId: '9' } }, 10_000);
  const req = await bot.nextEnvelope((e) => e.type === 'CHAT_SYNC_REQUEST');
  bot.envelope('chatSyncResponse', { success: true, guildsSynced: 1 }, req.requestId);
  t.like(await pending, { success: true, guildsSynced: 1 });

  // A bot that never answers: the caller's timeout.
  const slow = client.call(
    { payload: 'moderationRequest', body: { guildId: '9', userId: '1', action: 'MODERATION_KICK', actorId: 'ops' } },
    300,
  );
  t.like(await slow, {
    success: false,
    error: 'request timed out',
    guildId: '9',
    userId: '1',
    action: 'MODERATION_KICK',
  });
  bot.close();
  await client.close();
});

test('chat bot requests are validated before they are relayed', async (t) => {
  const s = stack();
  const mod = await createUser(s.db, { roles: ['role_moderator'] });
  const conn = await connect(wsBase(s, 0), { token: mod.token });
  const ask = async (payload: 'moderationRequest' | 'chatSyncRequest', body: Record<string, unknown>, id: string) => {
    conn.envelope(payload, body, id);
    return conn.nextEnvelope((e) => e.requestId === id);
  };
  t.like(
    (await ask('moderationRequest', { guildId: '42', userId: '7', action: 'MODERATION_TIMEOUT' }, 'm1'))
      .moderationResponse,
    {
      success: false,
      error: 'duration_seconds: required for a timeout, 1 to 2419200',
      guildId: '42',
      userId: '7',
      action: 'MODERATION_TIMEOUT',
    },
  );
  t.like(
    (await ask('moderationRequest', { guildId: 'abc', userId: '7', action: 'MODERATION_KICK' }, 'm2'))
      .moderationResponse,
    { success: false, error: 'guild_id: required snowflake (digits)' },
  );
  t.like((await ask('moderationRequest', { guildId: '42', userId: '7' }, 'm3')).moderationResponse, {
    success: false,
    error: 'action: required',
  });
  t.like((await ask('chatSyncRequest', { scope: 'CHAT_SYNC_SCOPE_MEMBERS' }, 's1')).chatSyncResponse, {
    success: false,
    error: 'guild_id: required for a member sync',
  });
  conn.close();
});
