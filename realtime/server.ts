import 'reflect-metadata';
import http from 'node:http';
import type net from 'node:net';
import { randomUUID } from 'node:crypto';
import { WebSocket, WebSocketServer, RawData } from 'ws';
import { CredentialResolver } from '../shared/auth/credentials';
import { Config, loadConfigOrExit } from '../shared/config';
import { createDb } from '../shared/db';
import { PubSub, WS_STATS_KEY } from '../shared/events';
import { createLogger, Logger } from '../shared/logger';
import { ANONYMOUS, Principal } from '../shared/policies';
import { createRedis, redisKey } from '../shared/redis';
import { subscriptionRefusal } from './channels';

interface Client {
  socket: WebSocket;
  principal: Principal;
  channels: Set<string>;
  alive: boolean;
}

export interface RunningRealtime {
  instanceId: string;
  port: number;
  server: http.Server;
  stats(): { connections: number; subscriptions: number };
  close(): Promise<void>;
}

function refuseUpgrade(socket: net.Socket, status: number, message: string): void {
  const body = JSON.stringify({ error: status === 401 ? 'Unauthorized' : 'Forbidden', message });
  socket.end(`HTTP/1.1 ${status} ${status === 401 ? 'Unauthorized' : 'Forbidden'}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`);
}

/**
 * The realtime process: authenticates WebSocket upgrades on /v1/ws, keeps channel subscriptions,
 * and fans out what arrives on Redis pub/sub to local subscribers. It never queries Postgres on
 * the fan-out path; the database is only used to resolve credentials (cached).
 */
export async function startRealtime(config: Config, opts: { port?: number; logger?: Logger } = {}): Promise<RunningRealtime> {
  const instanceId = randomUUID();
  const logger = opts.logger ?? createLogger('realtime', config.logLevel);
  const db = createDb(config, { poolMax: 4 });
  const redis = createRedis(config);
  const subscriber = createRedis(config);
  const authSubscriber = createRedis(config);
  for (const r of [redis, subscriber, authSubscriber]) r.on('error', (err) => logger.warn({ err: err.message }, 'redis error'));
  const credentials = new CredentialResolver(db, logger);
  await credentials.start(authSubscriber, config);

  const clients = new Set<Client>();
  const byChannel = new Map<string, Set<Client>>();

  const subscribe = (c: Client, channel: string) => {
    c.channels.add(channel);
    let set = byChannel.get(channel);
    if (!set) byChannel.set(channel, (set = new Set()));
    set.add(c);
  };
  const unsubscribe = (c: Client, channel: string) => {
    c.channels.delete(channel);
    const set = byChannel.get(channel);
    if (set) {
      set.delete(c);
      if (set.size === 0) byChannel.delete(channel);
    }
  };
  const send = (c: Client, msg: unknown) => {
    if (c.socket.readyState === WebSocket.OPEN) c.socket.send(JSON.stringify(msg));
  };

  const wss = new WebSocketServer({ noServer: true, maxPayload: 64 * 1024 });
  const server = http.createServer((_req, res) => {
    res.writeHead(426, { 'Content-Type': 'application/json' });
    res.end(JSON.stringify({ error: 'UpgradeRequired', message: 'connect with a WebSocket client to /v1/ws' }));
  });

  server.on('upgrade', (req, socket, head) => {
    const path = (req.url ?? '').split('?')[0];
    if (path !== '/v1/ws') return refuseUpgrade(socket as net.Socket, 403, 'unknown WebSocket path');
    void (async () => {
      let principal: Principal = ANONYMOUS;
      const auth = req.headers.authorization;
      if (auth) {
        const m = /^Bearer\s+(\S+)\s*$/i.exec(auth);
        if (!m) return refuseUpgrade(socket as net.Socket, 401, 'malformed Authorization header');
        const result = await credentials.resolve(m[1]);
        if (!result.ok) return refuseUpgrade(socket as net.Socket, result.status, result.message);
        principal = result.principal;
      }
      wss.handleUpgrade(req, socket, head, (ws) => wss.emit('connection', ws, principal));
    })().catch((err) => {
      logger.error({ err }, 'upgrade failed');
      socket.destroy();
    });
  });

  wss.on('connection', (socket: WebSocket, principal: Principal) => {
    const client: Client = { socket, principal, channels: new Set(), alive: true };
    clients.add(client);
    if (principal.kind === 'user') subscribe(client, `user:${principal.userId}`);
    socket.on('pong', () => (client.alive = true));
    socket.on('message', (data: RawData, isBinary: boolean) => {
      if (isBinary) return send(client, { type: 'error', message: 'binary frames are not supported on this connection' });
      let msg: { type?: unknown; channel?: unknown };
      try {
        msg = JSON.parse(data.toString());
      } catch {
        return send(client, { type: 'error', message: 'invalid JSON message' });
      }
      if (msg.type === 'ping') return send(client, { type: 'pong' });
      if ((msg.type === 'subscribe' || msg.type === 'unsubscribe') && typeof msg.channel === 'string') {
        if (msg.type === 'unsubscribe') {
          unsubscribe(client, msg.channel);
          return send(client, { type: 'message', channel: msg.channel, data: `Unsubscribed from ${msg.channel}` });
        }
        const refusal = subscriptionRefusal(client.principal, msg.channel);
        if (refusal) return send(client, { type: 'error', message: refusal });
        subscribe(client, msg.channel);
        return send(client, { type: 'message', channel: msg.channel, data: `Subscribed to ${msg.channel}` });
      }
      send(client, { type: 'error', message: 'unknown message type' });
    });
    socket.on('close', () => {
      clients.delete(client);
      for (const ch of [...client.channels]) unsubscribe(client, ch);
    });
    socket.on('error', () => socket.terminate());
  });

  // Fan-out: the payload arrives already serialised; it is forwarded as-is to every subscriber.
  const wsPrefix = redisKey(config, PubSub.ws(''));
  subscriber.on('pmessage', (_pattern, channel, payload) => {
    const set = byChannel.get(channel.slice(wsPrefix.length));
    if (!set) return;
    for (const c of set) if (c.socket.readyState === WebSocket.OPEN) c.socket.send(payload);
  });
  await subscriber.psubscribe(redisKey(config, PubSub.wsPattern));

  // Heartbeat: protocol Ping every interval; a client silent for the timeout is closed.
  const lastPong = new WeakMap<Client, number>();
  const heartbeat = setInterval(() => {
    const now = Date.now();
    for (const c of clients) {
      if (c.alive) lastPong.set(c, now);
      c.alive = false;
      if (now - (lastPong.get(c) ?? now) >= config.ws.heartbeatTimeoutMs) {
        c.socket.terminate();
        continue;
      }
      c.socket.ping();
    }
  }, config.ws.heartbeatIntervalMs);

  const stats = () => {
    let subscriptions = 0;
    for (const c of clients) subscriptions += c.channels.size;
    return { connections: clients.size, subscriptions };
  };
  const statsKey = redisKey(config, WS_STATS_KEY);
  const report = () => redis.hset(statsKey, instanceId, JSON.stringify({ ...stats(), at: Date.now() })).catch(() => undefined);
  await report();
  const reporter = setInterval(report, 5000);

  await new Promise<void>((resolve) => server.listen(opts.port ?? config.realtimePort, '127.0.0.1', resolve));
  const port = (server.address() as net.AddressInfo).port;
  logger.info({ port, instanceId }, 'realtime listening');

  return {
    instanceId,
    port,
    server,
    stats,
    async close() {
      clearInterval(heartbeat);
      clearInterval(reporter);
      for (const c of clients) c.socket.close(1001, 'server shutting down');
      await redis.hdel(statsKey, instanceId).catch(() => undefined);
      await new Promise<void>((resolve) => {
        wss.close();
        server.close(() => resolve());
        setTimeout(() => {
          for (const c of clients) c.socket.terminate();
        }, 1000).unref();
      });
      await credentials.stop();
      subscriber.disconnect();
      redis.disconnect();
      await db.destroy();
    },
  };
}

if (require.main === module) {
  const config = loadConfigOrExit();
  startRealtime(config)
    .then((rt) => {
      const shutdown = () => rt.close().then(() => process.exit(0), () => process.exit(1));
      process.once('SIGTERM', shutdown);
      process.once('SIGINT', shutdown);
    })
    .catch((err) => {
      process.stderr.write(`realtime failed to start: ${err?.stack ?? err}\n`);
      process.exit(1);
    });
}
