import 'reflect-metadata';
import http from 'node:http';
import net from 'node:net';
import type { Duplex } from 'node:stream';
import { CredentialResolver } from '../shared/auth/credentials';
import { ensureSystemApiKey, RetiredSystemKeyError } from '../shared/commands/apiKeys';
import { Config, loadConfigOrExit } from '../shared/config';
import { createContext } from '../shared/context';
import { RETRY_AFTER_SECONDS, toHttpError } from '../shared/errors';
import {
  answerMalformedRequests,
  carriesBody,
  listen,
  refuseBadRequestHead,
  closeLingering,
  requestHeadProblem,
  refuseSocket,
  requestTimeouts,
  upgradeProblem,
} from '../shared/httpEdge';
import { exitOnStartFailure, Logger } from '../shared/logger';
import { OutageLog } from '../shared/outageLog';
import { checkSchemaAtStart } from '../shared/schemaCheck';
import { createRedis, FAIL_FAST, redisReady } from '../shared/redis';
import { ReleaseDeadline } from '../shared/shutdown';
import { SERVICE_VERSION } from '../shared/version';
import { createApp } from './app';
import { deferContinue } from './middleware/body';
import { DRAIN_IDLE_GRACE_MS, HttpDrain, trackConnections } from './drain';
import { buildGraphqlSchema } from './graphql';
import { WsTunnel } from './wsTunnel';
import { RateLimiter } from '../shared/caches/rateLimiter';
import { listenForConfigChanges } from '../shared/caches/systemConfig';
import type { ApiServices } from './services';
import { loadGeoIp } from '../shared/geoip';
/** Seconds between tries to store SYSTEM_API_KEY while the database cannot be reached. */
const SYSTEM_KEY_RETRY_MS = 2000;

/**
 * Stores SYSTEM_API_KEY. A database that cannot be reached does not hold the start (a restart or
 * a `pm2 reload` during an outage would otherwise leave no api at all): the api serves, answering
 * 503 for what needs the database, and tries again every SYSTEM_KEY_RETRY_MS until it succeeds.
 */
async function ensureSystemKeyWhenReachable(
  ctx: ReturnType<typeof createContext>,
  key: string,
): Promise<{ stop(): void }> {
  let timer: NodeJS.Timeout | undefined;
  let stopped = false;
  const attempt = async (first: boolean): Promise<void> => {
    try {
      await ensureSystemApiKey(ctx.db, key);
      if (!first) ctx.logger.info('database reachable: system API key stored');
    } catch (err) {
      // A value regenerated through the API stays revoked: the api serves without it (the first-party
      // app's relayed calls answer 401) and says what to do, rather than not starting.
      if (err instanceof RetiredSystemKeyError)
        return void ctx.logger.error({ err: err.message }, 'system API key not stored');
      // Only an unreachable database waits (what answers 503); anything else (no migrations) stops the start.
      if (first && toHttpError(err)?.status !== 503) throw err;
      if (first)
        ctx.logger.warn(
          { err: (err as Error).message },
          'database not reachable at start: serving (503 where it is needed), storing the system API key once it is',
        );
      if (!stopped) timer = setTimeout(() => void attempt(false), SYSTEM_KEY_RETRY_MS).unref();
    }
  };
  await attempt(true);
  return {
    stop() {
      stopped = true;
      clearTimeout(timer);
    },
  };
}

export interface RunningApi {
  server: http.Server;
  services: ApiServices;
  port: number;
  close(): Promise<void>;
}

/**
 * Serves a request that asked to upgrade to something other than a WebSocket (`Upgrade: h2c`, as
 * `curl --http2` sends on http://) as the HTTP/1.1 request it also is: RFC 9110 §7.8 lets a server
 * ignore Upgrade, and Node hands every request with an Upgrade header to the 'upgrade' listener,
 * which would otherwise have refused it on every route. The connection closes after the answer
 * (its parser is gone). A body would have to be read from the bare socket: such a request is
 * refused, naming what to send instead.
 */
function serveIgnoringUpgrade(
  req: http.IncomingMessage,
  socket: Duplex,
  handle: (req: http.IncomingMessage, res: http.ServerResponse) => void,
  connections: HttpDrain,
): void {
  if (carriesBody(req))
    return refuseSocket(
      socket,
      400,
      `Upgrade: '${String(req.headers.upgrade).slice(0, 40)}' is not supported; send the request without Upgrade`,
    );
  const problem = requestHeadProblem(req);
  if (problem) return refuseSocket(socket, problem.status, problem.message);
  const res = new http.ServerResponse(req);
  res.shouldKeepAlive = false;
  res.assignSocket(socket as net.Socket);
  res.once('finish', () => closeLingering(socket));
  socket.on('error', () => socket.destroy());
  // A drain lets the answer finish; the socket ends after it.
  connections.onTunnelClose(socket, () => undefined);
  // Nothing more is read as this request's body.
  req.push(null);
  handle(req, res);
}

/**
 * Forwards WebSocket upgrades on /v1/ws to the realtime process on this machine, so clients see
 * one origin. A handshake that cannot succeed is refused here with JSON; a good one is replayed
 * upstream and both sockets are piped (api/wsTunnel.ts). Once piping, nothing but WebSocket bytes
 * reaches the client: when either side ends or fails, the other is closed (an HTTP status written
 * into an upgraded stream would be read as a corrupt frame). A drain ends a piped tunnel with 1012
 * "service restart" between two frames, and one still connecting upstream with a 503.
 */
function forwardUpgrades(
  server: http.Server,
  config: Config,
  logger: Logger,
  connections: HttpDrain,
  handle: (req: http.IncomingMessage, res: http.ServerResponse) => void,
): void {
  // Clients reconnect at once (docs/websocket.md): while realtime is down, one line per refusal
  // would be one per client and attempt. Folded, with a line when it accepts connections again.
  const realtime = new OutageLog(logger, 'realtime process');
  server.on('upgrade', (req: http.IncomingMessage, socket: Duplex, head: Buffer) => {
    if (!/(?:^|,)\s*websocket\s*(?:,|$)/i.test(req.headers.upgrade ?? ''))
      return serveIgnoringUpgrade(req, socket, handle, connections);
    const problem = upgradeProblem(req);
    if (problem) return refuseSocket(socket, problem.status, problem.message, problem.headers);
    let tunnel: WsTunnel | undefined;
    const upstream = net.connect(config.realtimePort, '127.0.0.1', () => {
      realtime.answered();
      let head1 = `${req.method} ${req.url} HTTP/${req.httpVersion}\r\n`;
      for (let i = 0; i < req.rawHeaders.length; i += 2) {
        if (req.rawHeaders[i].toLowerCase() === 'x-forwarded-for') continue;
        head1 += `${req.rawHeaders[i]}: ${req.rawHeaders[i + 1]}\r\n`;
      }
      head1 += `X-Forwarded-For: ${req.socket.remoteAddress ?? ''}\r\n\r\n`;
      upstream.write(head1);
      if (head.length) upstream.write(head);
      tunnel = new WsTunnel(socket, upstream);
    });
    upstream.on('error', (err) => {
      if (tunnel) return; // 'close' follows
      realtime.failure('realtime process unreachable for /v1/ws', err.message, { err: err.message });
      refuseSocket(socket, 503, 'the real-time service is unavailable; try again shortly', {
        'Retry-After': String(RETRY_AFTER_SECONDS),
      });
    });
    socket.on('error', () => upstream.destroy());
    socket.on('close', () => upstream.destroy());
    connections.onTunnelClose(socket, () => {
      if (tunnel) return tunnel.restart();
      // Not connected to realtime yet: nothing was forwarded, the upgrade is refused as realtime's
      // drain refuses one it is still authenticating.
      upstream.destroy();
      refuseSocket(socket, 503, 'the server is restarting, reconnect');
    });
  });
}

/**
 * Starts the api process: context, credentials cache, rate limiter, GraphQL schema, HTTP server.
 * `drainIdleGraceMs` shortens the quiet time idle keep-alive sockets get in close(), `logger`
 * replaces the process's own (tests).
 */
export async function startApi(
  config: Config,
  opts: { port?: number; drainIdleGraceMs?: number; logger?: Logger } = {},
): Promise<RunningApi> {
  const ctx = createContext(config, 'api', opts.logger);
  // A schema behind this build stops the start here, naming the command to run.
  const stopSchemaRecheck = await checkSchemaAtStart(ctx.db, ctx.logger, { name: 'api' });
  // The fail-fast connection refuses commands until connected; a Redis that is down does not hold the start.
  if (!(await redisReady(ctx.redis, 2000))) ctx.logger.warn('redis not reachable at start; serving without it');
  // Auto-pipelining sends the counters of concurrent requests in one write: one syscall, not one per request.
  // Fail-fast like every connection requests use, command timeout included: a Redis that stops
  // answering with its connection open would otherwise hold every rate-limited request.
  const limiterRedis = createRedis(config, { ...FAIL_FAST, connectTimeout: 1000, enableAutoPipelining: true });
  ctx.redisErrors.watch(limiterRedis, 'rate limiter');
  const credentials = new CredentialResolver(ctx.db, ctx.logger);
  const subscriber = createRedis(config);
  ctx.redisErrors.watch(subscriber, 'subscriber');
  await credentials.start(subscriber, config, { publisher: ctx.redis });
  // The same subscriber carries system config changes to this process's config cache.
  await listenForConfigChanges(subscriber, config, ctx.db, ctx.logger);
  const systemKey = config.systemApiKey ? await ensureSystemKeyWhenReachable(ctx, config.systemApiKey) : undefined;

  const services: ApiServices = {
    ...ctx,
    credentials,
    rateLimiter: new RateLimiter(limiterRedis, config, ctx.logger),
    startedAt: Date.now(),
    version: SERVICE_VERSION,
  };
  const app = createApp(services, await buildGraphqlSchema());
  const handle = app.callback();
  const server = http.createServer(
    {
      ...requestTimeouts(config.httpRequestTimeoutMs),
      // Refused by refuseBadRequestHead instead, with a JSON answer (Node's 400 has no body).
      requireHostHeader: false,
    },
    // A request pipelined behind its socket's last answer is not run (api/drain.ts).
    (req, res) => (connections.unanswerable(req) || refuseBadRequestHead(req, res) ? undefined : handle(req, res)),
  );
  // `Expect: 100-continue` is answered when the body is read (api/middleware/body.ts), not at once
  // as Node does by default: a request refused first (credentials, rate limit) sends no body.
  server.on('checkContinue', (req: http.IncomingMessage, res: http.ServerResponse) => {
    deferContinue(req);
    server.emit('request', req, res);
  });
  server.keepAliveTimeout = 65_000;
  answerMalformedRequests(server);
  const connections = trackConnections(server, ctx.logger, {
    idleGraceMs: opts.drainIdleGraceMs ?? DRAIN_IDLE_GRACE_MS,
    // Requests waiting on a job (data export) or the chat bot answer before the deadline cuts them.
    endWaits: () => ctx.endWaits(),
    routeOf: (method, path) => app.routePattern(method, path),
  });
  forwardUpgrades(server, config, ctx.logger, connections, handle);
  // In production geoip-lite's database (about a second) is loaded now, not by the first audit event
  // a request writes. Elsewhere the first public address loads it: a test or development process
  // seldom sees one, and every test file's stack paid ~0.3 s of CPU for it.
  if (config.env === 'production') loadGeoIp();
  await listen(server, opts.port ?? config.port, config.host);
  const port = (server.address() as net.AddressInfo).port;
  ctx.outbox.start();
  ctx.logger.info({ port }, 'api listening');

  return {
    server,
    services,
    port,
    async close() {
      // Stop accepting, answer what is in flight with Connection: close, then release Postgres and Redis.
      stopSchemaRecheck();
      const drained = await connections.drain(config.drainTimeoutMs);
      ctx.logger.info(drained, 'api drained');
      systemKey?.stop();
      // The last writes (key usage, rate counts) and the release share one deadline: PostgreSQL or
      // Redis may hang (shared/shutdown.ts).
      const release = new ReleaseDeadline(ctx.logger);
      await release.step('credential usage', () => credentials.stop());
      await release.step('rate limit counts', () => services.rateLimiter.close());
      limiterRedis.disconnect();
      await ctx.close(release);
    },
  };
}

if (require.main === module) {
  const config = loadConfigOrExit();
  const started = startApi(config);
  // Installed before the port opens: a signal that arrives between 'api listening' and the end of
  // the start (a process descheduled there on a busy host) would otherwise find Node's default
  // action and end the process without a drain. Such a signal drains once the start is done.
  const shutdown = (signal: string) => {
    void started.then(
      (api) => {
        api.services.logger.info({ signal, deadlineMs: config.drainTimeoutMs }, 'api draining');
        api.close().then(
          // 0, or 1 when the process stops on a schema behind the build (shared/schemaCheck.ts).
          () => process.exit(),
          (err) => {
            api.services.logger.error({ err }, 'api drain failed');
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
    // With wait_ready (ecosystem.config.js), `pm2 reload` stops an old instance only after this.
    .then(() => process.send?.('ready'))
    .catch((err) => exitOnStartFailure('api', config.logLevel, err));
}
