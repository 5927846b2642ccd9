import http from 'node:http';
import type net from 'node:net';
import { WebSocket, WebSocketServer } from 'ws';
import { databaseFailureReason, errorName, isDatabaseUnavailable, RETRY_AFTER_SECONDS } from '../shared/errors';
import {
  answerMalformedRequests,
  refuseSocket,
  requestTimeouts,
  UPGRADE_REQUIRED,
  upgradeProblem,
  WS_PATH,
} from '../shared/httpEdge';
import { isRoutePath } from '../shared/routePaths';
import type { Logger } from '../shared/logger';
import { AuthDeps, authenticateUpgrade, UpgradeAuth } from './auth';

const SUBPROTOCOL = Symbol('subprotocol');
type UpgradeRequest = http.IncomingMessage & { [SUBPROTOCOL]?: string | null };

export type AcceptedUpgrade = Extract<UpgradeAuth, { ok: true }>;

const RESTARTING = 'the server is restarting, reconnect';

/**
 * The HTTP side of /v1/ws: a plain request gets 426, a handshake that cannot succeed is refused
 * before authentication costs a database read, then the upgrade is authenticated (realtime/auth)
 * and handed to `onConnection`. While `draining()` upgrades are refused with 503, also those still
 * authenticating, so none opens after every client was told to go.
 */
export function acceptUpgrades(
  deps: AuthDeps & { logger: Logger },
  draining: () => boolean,
  onConnection: (socket: WebSocket, auth: AcceptedUpgrade) => void,
): { server: http.Server; wss: WebSocketServer } {
  const wss = new WebSocketServer({
    noServer: true,
    maxPayload: 64 * 1024,
    clientTracking: false,
    perMessageDeflate: false,
    handleProtocols: (_protocols, req) => (req as UpgradeRequest)[SUBPROTOCOL] ?? false,
  });
  // The api's request timeouts: an idle or half-sent handshake holds a connection 10 s, not 60-300.
  const server = http.createServer(requestTimeouts(deps.config.httpRequestTimeoutMs), (req, res) => {
    // Only /v1/ws is served here, and only as a WebSocket: a plain request to it is told to
    // upgrade, one to any other path is a 404 (as a handshake there is). A body is not read: the
    // connection closes after the answer rather than take whatever was promised.
    const wsPath = isRoutePath((req.url ?? '').split('?')[0], WS_PATH);
    const status = wsPath ? UPGRADE_REQUIRED.status : 404;
    const message = wsPath
      ? UPGRADE_REQUIRED.message
      : `no such path; this port serves WebSocket connections on ${WS_PATH}`;
    res.writeHead(status, {
      'Content-Type': 'application/json',
      'X-Content-Type-Options': 'nosniff',
      ...(wsPath ? UPGRADE_REQUIRED.headers : {}),
      ...(req.complete ? {} : { Connection: 'close' }),
    });
    res.end(JSON.stringify({ error: errorName(status), message }));
  });

  answerMalformedRequests(server);
  // Handshake faults upgradeProblem does not look at (Sec-WebSocket-Protocol, -Extensions syntax).
  wss.on('wsClientError', (err: Error, socket: net.Socket) => refuseSocket(socket, 400, err.message));

  server.on('upgrade', (req: UpgradeRequest, socket: net.Socket, head: Buffer) => {
    socket.on('error', () => socket.destroy());
    if (draining()) return refuseSocket(socket, 503, RESTARTING);
    const problem = upgradeProblem(req);
    if (problem) return refuseSocket(socket, problem.status, problem.message, problem.headers);
    void (async () => {
      const result: UpgradeAuth = await authenticateUpgrade(req, deps);
      if (!result.ok) return refuseSocket(socket, result.status, result.message);
      if (socket.destroyed) return;
      if (draining()) return refuseSocket(socket, 503, RESTARTING);
      req[SUBPROTOCOL] = result.subprotocol;
      wss.handleUpgrade(req, socket, head, (ws) => onConnection(ws, result));
    })().catch((err) => {
      // A database outage refuses every upgrade (clients reconnect at once): folded, not a line each.
      if (isDatabaseUnavailable(err)) {
        const reason = databaseFailureReason(err);
        deps.dbOutages.failure('dependency unavailable', reason, { err: reason, path: '/v1/ws' });
      } else deps.logger.error({ err }, 'upgrade failed');
      const retry = { 'Retry-After': String(RETRY_AFTER_SECONDS) };
      refuseSocket(socket, 503, 'could not authenticate the connection, try again', retry);
    });
  });
  return { server, wss };
}
