import fs from 'node:fs';
import { parseArgs } from 'node:util';
import { WebSocket } from 'ws';
import { decodeEnvelope, encodeEnvelope, protoType } from '../shared/proto';

const USAGE = `usage: node dist/scripts/chatBot.js --url ws://HOST:PORT/v1/ws --key <API key> --fixture <file.json> [--silent]
  The reference chat bot: connects to /v1/ws as the chat bot (X-Source-Service: chat_bot; the key is
  the system key or an API key with chat:sync) and answers the service's chat sync requests
  (ChatSyncRequest 110 → ChatSyncResponse 111) from the fixture, split into frames of at most 64 KiB.
  Prints one JSON line per event: connected, request, answered, settings (ChatSettingsResponse
  pushes), chat_user_linked / chat_user_unlinked / chat_permission_changed, closed.
  --fixture   {"guilds": [{guild_id, name, icon, owner_id, member_count, boost_count, premium_tier,
              channels: [...], roles: [...], members: [...]}]} (docs/chat.md)
  --silent    never answer a request (to try the service's timeouts)
  Reconnects a second after the connection closes; stops on SIGINT/SIGTERM.`;

type Json = Record<string, any>;

/** Frames stay below the realtime process's 64 KiB limit, with room for the envelope. */
const FRAME_BUDGET = 60 * 1024;

const camel = (k: string) => k.replace(/_([a-z])/g, (_m, c: string) => c.toUpperCase());
/** snake_case fixture objects → the camelCase fields protobufjs expects; null → absent. */
function toProto(o: Json): Json {
  const out: Json = {};
  for (const [k, v] of Object.entries(o)) {
    if (v === null || v === undefined) continue;
    out[camel(k)] = v;
  }
  return out;
}

interface Fixture {
  guilds: Array<Json & { channels?: Json[]; roles?: Json[]; members?: Json[] }>;
}

function loadFixture(file: string): Fixture {
  const f = JSON.parse(fs.readFileSync(file, 'utf8')) as Fixture;
  if (!f || !Array.isArray(f.guilds)) throw new Error(`${file}: expected {"guilds": [...]}`);
  return f;
}

const TYPES = {
  guilds: protoType('ChatGuild'),
  channels: protoType('ChatChannel'),
  roles: protoType('ChatRole'),
  members: protoType('ChatMember'),
};
type ListName = keyof typeof TYPES;

/** Splits the answer's lists into frames of at most FRAME_BUDGET encoded bytes each. */
function frames(lists: Partial<Record<ListName, Json[]>>, last: Json): Json[] {
  const out: Json[] = [];
  let cur: Json = {};
  let size = 0;
  for (const name of Object.keys(TYPES) as ListName[]) {
    for (const item of lists[name] ?? []) {
      const bytes = TYPES[name].encode(TYPES[name].fromObject(item)).finish().length + 6;
      if (size + bytes > FRAME_BUDGET && size > 0) {
        out.push({ ...cur, success: true, more: true });
        cur = {};
        size = 0;
      }
      (cur[name] ??= []).push(item);
      size += bytes;
    }
  }
  out.push({ ...cur, ...last });
  return out;
}

/** The answer to one ChatSyncRequest, from the fixture. */
function answer(fixture: Fixture, req: Json): Json[] {
  const scope = req.scope ?? 'CHAT_SYNC_SCOPE_GUILDS';
  const guildId: string | undefined = req.guildId || undefined;
  const guilds = fixture.guilds.filter((g) => !guildId || String(g.guild_id) === guildId);
  if (scope === 'CHAT_SYNC_SCOPE_MEMBERS') {
    const g = guilds[0];
    if (!g) return [{ success: false, error: `the bot is not in guild ${guildId}` }];
    const members = (g.members ?? []).map((m) => toProto({ ...m, guild_id: g.guild_id }));
    return frames({ members }, { success: true, membersSynced: members.length });
  }
  const lists = {
    guilds: guilds.map((g) => {
      const { channels: _c, roles: _r, members: _m, ...rest } = g;
      return toProto(rest);
    }),
    channels: guilds.flatMap((g) => (g.channels ?? []).map((c) => toProto({ ...c, guild_id: g.guild_id }))),
    roles: guilds.flatMap((g) => (g.roles ?? []).map((r) => toProto({ ...r, guild_id: g.guild_id }))),
  };
  return frames(lists, {
    success: true,
    guildsSynced: lists.guilds.length,
    channelsSynced: lists.channels.length,
    rolesSynced: lists.roles.length,
  });
}

const print = (o: Json) => process.stdout.write(`${JSON.stringify(o)}\n`);

/** Sends the frames of one answer, yielding between them so pings are still answered. */
async function send(sock: WebSocket, parts: Json[], requestId: string): Promise<void> {
  for (const p of parts) {
    if (sock.readyState !== WebSocket.OPEN) return;
    sock.send(encodeEnvelope('chatSyncResponse', p, requestId));
    await new Promise((r) => setImmediate(r));
  }
  print({ event: 'answered', request_id: requestId, frames: parts.length });
}

function main(): void {
  const { values } = parseArgs({
    options: {
      url: { type: 'string' },
      key: { type: 'string' },
      fixture: { type: 'string' },
      silent: { type: 'boolean', default: false },
      help: { type: 'boolean', default: false },
    },
  });
  if (values.help || !values.url || !values.key || !values.fixture) {
    process.stderr.write(`${USAGE}\n`);
    process.exit(values.help ? 0 : 2);
  }
  const fixture = loadFixture(values.fixture);
  let stopping = false;
  let ws: WebSocket | undefined;

  const connect = () => {
    const sock = new WebSocket(values.url!, {
      headers: { authorization: `Bearer ${values.key}`, 'x-source-service': 'chat_bot' },
      maxPayload: 16 * 1024 * 1024,
    });
    ws = sock;
    sock.on('open', () => print({ event: 'connected', guilds: fixture.guilds.length }));
    sock.on('unexpected-response', (_req, res) => {
      print({ event: 'refused', status: res.statusCode });
      process.exitCode = 1;
      stopping = true;
    });
    sock.on('error', (err) => print({ event: 'error', message: err.message }));
    sock.on('close', (code) => {
      print({ event: 'closed', code });
      if (!stopping) setTimeout(connect, 1000);
    });
    sock.on('message', (data, isBinary) => {
      if (!isBinary) return;
      let env: Json;
      try {
        env = decodeEnvelope(data as Buffer);
      } catch {
        return;
      }
      switch (env.payload) {
        case 'chatSyncRequest': {
          const req = env.chatSyncRequest ?? {};
          print({
            event: 'request',
            request_id: env.requestId,
            scope: req.scope ?? 'CHAT_SYNC_SCOPE_GUILDS',
            guild_id: req.guildId ?? null,
          });
          if (values.silent) return;
          void send(sock, answer(fixture, req), env.requestId);
          return;
        }
        case 'chatSettingsResponse':
          return print({ event: 'settings', ...env.chatSettingsResponse });
        case 'chatUserLinked':
          return print({ event: 'chat_user_linked', ...env.chatUserLinked });
        case 'chatUserUnlinked':
          return print({ event: 'chat_user_unlinked', ...env.chatUserUnlinked });
        case 'chatPermissionChanged':
          return print({ event: 'chat_permission_changed', ...env.chatPermissionChanged });
        default:
          return;
      }
    });
  };

  const stop = () => {
    stopping = true;
    if (!ws || ws.readyState !== WebSocket.OPEN) process.exit(0);
    ws.close(1000);
    setTimeout(() => process.exit(0), 500).unref();
  };
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
  connect();
}

main();
