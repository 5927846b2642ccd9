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
} from '../shared/httpEdge';
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
  const server = http.createServer(requestTimeouts(deps.config.httpRequestTimeoutMs), (_req, res) => {
    res.writeHead(UPGRADE_REQUIRED.status, {
      'Content-Type': 'application/json',
      'X-Content-Type-Options': 'nosniff',
      ...UPGRADE_REQUIRED.headers,
    });
    res.end(JSON.stringify({ error: errorName(UPGRADE_REQUIRED.status), message: UPGRADE_REQUIRED.message }));
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
