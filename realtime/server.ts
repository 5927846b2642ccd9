import 'reflect-metadata';
import type http from 'node:http';
import type net from 'node:net';
import { randomUUID } from 'node:crypto';
import { WebSocket, RawData } from 'ws';
import { CredentialResolver } from '../shared/auth/credentials';
import { Config, loadConfigOrExit } from '../shared/config';
import { createDb, databaseOutageLog } from '../shared/db';
import { CHAT_BOTS_WS_CHANNEL, PubSub } from '../shared/events';
import { listen } from '../shared/httpEdge';
import { createLogger, exitOnStartFailure, Logger } from '../shared/logger';
import { checkSchemaAtStart } from '../shared/schemaCheck';
import { Queues } from '../shared/queues';
import { createRedis, RedisErrorLog, redisKey, RedisKeys } from '../shared/redis';
import { ReleaseDeadline } from '../shared/shutdown';
import { SERVICE_RESTART_CLOSE } from '../shared/wsMessages';
import { AccountEvents } from './accountEvents';
import type { AuthDeps } from './auth';
import { fanOut } from './fanout';
import { CloseCode } from './frames';
import { Hub } from './hub';
import { handleClientMessage, handleHeldFrames, MessageDeps } from './messages';
import { RpcBroker } from './rpc';
import { AcceptedUpgrade, acceptUpgrades } from './upgrade';

interface RealtimeStats {
  connections: number;
  subscriptions: number;
  chatBots: number;
}

export interface RunningRealtime {
  instanceId: string;
  port: number;
  server: http.Server;
  logger: Logger;
  stats(): RealtimeStats;
  close(): Promise<void>;
}

/**
 * The realtime process (spec §4.26): authenticates WebSocket upgrades on /v1/ws, keeps channel
 * subscriptions, speaks JSON and protobuf, and fans out what arrives on Redis pub/sub to local
 * subscribers. Every instance subscribes to every channel pattern, so one publish reaches the
 * subscribers of all instances. The fan-out never touches Postgres; the database is used only to
 * authenticate and to re-check connections after account events.
 */
/** A dead instance's counts are forgotten this long after its last report (live ones report every 5 s). */
const STATS_FORGET_MS = 10 * 60_000;

/** When a ws:stats field was written (NaN for a value of another shape, which is then forgotten). */
function statsAt(value: string): number {
  try {
    return Number((JSON.parse(value) as { at?: unknown }).at);
  } catch {
    return NaN;
  }
}

export async function startRealtime(
  config: Config,
  opts: { port?: number; logger?: Logger } = {},
): Promise<RunningRealtime> {
  const instanceId = randomUUID();
  const logger = opts.logger ?? createLogger('realtime', config.logLevel);
  const dbOutages = databaseOutageLog(logger);
  const db = createDb(config, { poolMax: 4, serving: true, logger, outages: dbOutages, name: 'realtime' });
  // A schema behind this build stops the start here, naming the command to run.
  const stopSchemaRecheck = await checkSchemaAtStart(db, logger, { name: 'realtime' });
  const redisErrors = new RedisErrorLog(logger);
  const redis = redisErrors.watch(createRedis(config), 'requests');
  const subscriber = redisErrors.watch(createRedis(config), 'subscriber');
  const authSubscriber = redisErrors.watch(createRedis(config), 'auth subscriber');
  const credentials = new CredentialResolver(db, logger);
  await credentials.start(authSubscriber, config, { publisher: redis });
  const queues = new Queues(redis, config, redisErrors);

  const hub = new Hub(config.ws.maxBufferedBytes);
  const deps: AuthDeps = { db, dbOutages, redis, config, credentials };
  const rpc = new RpcBroker(instanceId, hub, redis, queues, config, logger);
  const accountEvents = new AccountEvents(hub, deps, logger);
  const messageDeps: MessageDeps = { hub, rpc, maxMessagesPer10s: config.ws.maxMessagesPer10s };
  hub.onIncomingReleased = (c) => handleHeldFrames(messageDeps, c);
  hub.onBotReleased = () => rpc.onBotReleased();
  hub.onBotDemoted = (c) => rpc.failBotRequests(c, 'the chat bot lost its access');

  // Credential changes (revoked keys and tokens, deleted sessions, role edits) re-check the affected
  // sockets, right after the resolver dropped its cache and before the change is acknowledged.
  credentials.onInvalidation((msg) => accountEvents.onInvalidation(msg));
  credentials.onDeaf(() => (hub.holdingAll = true));
  credentials.onResubscribed(() => {
    // Each authenticated connection keeps holding through its own re-check, which releases it.
    hub.holdingAll = false;
    accountEvents.recheckAll();
  });

  // Set by close(): upgrades still authenticating are refused, not opened after every client was told to go.
  let draining = false;
  const { server, wss } = acceptUpgrades({ ...deps, logger }, () => draining, onConnection);

  function onConnection(socket: WebSocket, auth: AcceptedUpgrade): void {
    const client = hub.create(socket, auth.principal, auth.auth, auth.sourceService, auth.chatBot);
    if (auth.principal.kind === 'user') hub.subscribe(client, `user:${auth.principal.userId}`);
    if (auth.chatBot) hub.subscribe(client, CHAT_BOTS_WS_CHANNEL);
    accountEvents.watchExpiry(client, auth.expiresAt);
    socket.on('pong', () => {
      client.lastPong = Date.now();
    });
    socket.on('message', (data: RawData, isBinary: boolean) =>
      handleClientMessage(messageDeps, client, data, isBinary),
    );
    socket.on('close', () => {
      hub.remove(client);
      rpc.onClientGone(client);
    });
    // On a protocol error (e.g. a frame over maxPayload) ws has already sent the close frame with
    // its code (1009, 1002…) and ends the socket. Terminating at once would reset the connection
    // and lose that frame, so only a client that does not finish closing is cut off, a moment later.
    socket.on('error', () => setTimeout(() => socket.terminate(), 1000).unref());
  }

  const deliver = fanOut(hub, accountEvents);
  const wsPrefix = redisKey(config, PubSub.ws(''));
  const rpcChannels = rpc.channels();
  subscriber.on('pmessageBuffer', (_pattern: Buffer, channel: Buffer, payload: Buffer) => {
    // Pushes come on their own connection: one that arrives after the invalidation subscription
    // has been silent for a second (Redis hung, this machine too busy to count the heartbeats out)
    // waits for the re-check its next answer starts, like every push while deaf.
    credentials.noteSilence();
    deliver(channel.toString('utf8').slice(wsPrefix.length), payload);
  });
  subscriber.on('messageBuffer', (channel: Buffer, payload: Buffer) => {
    const ch = channel.toString('utf8');
    if (ch === rpcChannels.reply) rpc.onReply(payload.toString('utf8'));
    else if (ch === rpcChannels.bot) rpc.onBotRequest(payload.toString('utf8'));
  });
  await subscriber.psubscribe(redisKey(config, PubSub.wsPattern));
  await subscriber.subscribe(rpcChannels.reply, rpcChannels.bot);

  // Heartbeat (spec §6): a protocol Ping every interval; a client whose last Pong is older than the
  // timeout is dropped. The JSON ping does not count.
  const heartbeat = setInterval(() => {
    const now = Date.now();
    for (const c of hub.clients) {
      if (now - c.lastPong >= config.ws.heartbeatTimeoutMs) {
        c.socket.terminate();
        continue;
      }
      if (c.socket.readyState === WebSocket.OPEN) c.socket.ping();
    }
  }, config.ws.heartbeatIntervalMs);

  // Counts for /health and the chat bot relay: reported on change (debounced) and every 5 s.
  const statsKey = redisKey(config, RedisKeys.wsStats);
  const report = () =>
    redis.hset(statsKey, instanceId, JSON.stringify({ ...hub.stats(), at: Date.now() })).catch(() => undefined);
  let reportTimer: NodeJS.Timeout | undefined;
  hub.setOnChange(() => {
    if (reportTimer) return;
    reportTimer = setTimeout(() => {
      reportTimer = undefined;
      void report();
    }, 100);
  });
  // An instance that died without draining (SIGKILL, a crash) never removed its field: each start
  // and then every minute, fields not refreshed for STATS_FORGET_MS are dropped.
  const forgetDead = async () => {
    const all = await redis.hgetall(statsKey);
    const before = Date.now() - STATS_FORGET_MS;
    const dead = Object.entries(all)
      .filter(([id, v]) => id !== instanceId && !(statsAt(v) >= before))
      .map(([id]) => id);
    if (dead.length) await redis.hdel(statsKey, ...dead);
  };
  await report();
  await forgetDead().catch(() => undefined);
  let reports = 0;
  const reporter = setInterval(() => {
    void report();
    if (++reports % 12 === 0) void forgetDead().catch(() => undefined);
  }, 5000);

  await listen(server, opts.port ?? config.realtimePort, config.realtimeHost);
  const port = (server.address() as net.AddressInfo).port;
  logger.info({ port, instanceId }, 'realtime listening');

  return {
    instanceId,
    port,
    server,
    logger,
    stats: () => hub.stats(),
    async close() {
      const started = Date.now();
      draining = true;
      stopSchemaRecheck();
      clearInterval(heartbeat);
      clearInterval(reporter);
      if (reportTimer) clearTimeout(reportTimer);
      hub.setOnChange(() => undefined);
      rpc.close();
      const clients = hub.clients.size;
      // 1012 rather than 1001 (going away): the service stays up, clients reconnect at once.
      for (const c of hub.clients) hub.close(c, CloseCode.serviceRestart, SERVICE_RESTART_CLOSE.reason);
      // Redis may be down or hung: its steps, and the database's, get one deadline.
      const release = new ReleaseDeadline(logger);
      await release.step('instance stats', () => redis.hdel(statsKey, instanceId));
      await new Promise<void>((resolve) => {
        wss.close();
        server.close(() => resolve());
        // A client that does not answer the close frame within a second is dropped.
        setTimeout(() => {
          for (const c of hub.clients) c.socket.terminate();
        }, 1000).unref();
      });
      logger.info({ clients, ms: Date.now() - started }, 'realtime drained');
      await release.step('credential cache', () => credentials.stop());
      await release.step('queues', () => queues.close());
      subscriber.disconnect();
      redis.disconnect();
      await release.step('database pool', () => db.destroy());
    },
  };
}

if (require.main === module) {
  const config = loadConfigOrExit();
  const started = startRealtime(config);
  // Installed before the port opens (as the api's): a signal during the start drains once it is done.
  const shutdown = (signal: string) => {
    void started.then(
      (rt) => {
        rt.logger.info({ signal }, 'realtime draining');
        rt.close().then(
          // 0, or 1 when the process stops on a schema behind the build (shared/schemaCheck.ts).
          () => process.exit(),
          (err) => {
            rt.logger.error({ err }, 'realtime drain failed');
            process.exit(1);
          },
        );
      },
      () => undefined,
    );
  };
  // PM2 stops and reloads with SIGINT, systemd and docker with SIGTERM.
  process.once('SIGTERM', () => shutdown('SIGTERM'));
  process.once('SIGINT', () => shutdown('SIGINT'));
  started
    .then((rt) => {
      // With wait_ready (ecosystem.config.js), `pm2 reload` stops an old instance only after this.
      process.send?.('ready');
      // `--ipc-probe` (bench/wsFanout.ts, started with an IPC channel): answers memory probes,
      // after a GC when the process runs with --expose-gc.
      if (process.send && process.argv.includes('--ipc-probe')) {
        process.on('message', (msg: { cmd?: string }) => {
          if (msg?.cmd !== 'memory') return;
          (globalThis as { gc?: () => void }).gc?.();
          process.send!({ cmd: 'memory', memory: process.memoryUsage(), stats: rt.stats(), port: rt.port });
        });
        process.send({ cmd: 'ready', port: rt.port, instanceId: rt.instanceId });
      }
    })
    .catch((err) => exitOnStartFailure('realtime', config.logLevel, err));
}
