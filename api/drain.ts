import type http from 'node:http';
import net from 'node:net';
import type { Logger } from '../shared/logger';

/**
 * How long a keep-alive socket with nothing in flight stays open once the drain has begun (counted
 * from the start of the drain, its last response or the last byte it received, whichever is last).
 * A request the client has already put on the wire is then read and answered with
 * `Connection: close` instead of being reset with the socket; closing a socket the moment it is idle
 * (what `server.close()` does) resets exactly those requests, and the client cannot tell whether a
 * POST among them was stored.
 */
export const DRAIN_IDLE_GRACE_MS = 1000;
const SWEEP_MS = 100;

interface SocketState {
  /** Requests received on the socket and not yet answered (more than one when pipelined). */
  inFlight: number;
  /** Last moment something happened on the socket: a response ended or bytes arrived. */
  quietSince: number;
  bytesRead: number;
}

export interface DrainResult {
  ms: number;
  /** Sockets destroyed at the deadline with a request still in flight. */
  cut: number;
  /** WebSocket tunnels to realtime that were closed (their clients reconnect). */
  tunnels: number;
}

export interface HttpDrain {
  /**
   * Stops accepting connections and closes every socket once it has nothing to answer: responses
   * from now on carry `Connection: close` (Node ends the socket after them), idle keep-alive
   * sockets are closed after DRAIN_IDLE_GRACE_MS of quiet. Upgraded sockets (WebSocket tunnels)
   * are closed once no HTTP socket is left. At `deadlineMs` whatever remains is destroyed.
   * Resolves when the server is closed; later calls return the same promise.
   */
  drain(deadlineMs: number): Promise<DrainResult>;
}

/** Tracks the connections and in-flight requests of `server` so that it can be drained without resetting a request. */
export function trackConnections(server: http.Server, logger: Logger, opts: { idleGraceMs?: number } = {}): HttpDrain {
  const idleGraceMs = opts.idleGraceMs ?? DRAIN_IDLE_GRACE_MS;
  const sockets = new Map<net.Socket, SocketState>();
  const tunnels = new Set<net.Socket>();
  // Responses whose headers may still be sent keep-alive: switched to Connection: close when the drain begins.
  const open = new Set<http.ServerResponse>();
  let draining = false;

  server.on('connection', (socket: net.Socket) => {
    sockets.set(socket, { inFlight: 0, quietSince: Date.now(), bytesRead: 0 });
    socket.once('close', () => {
      sockets.delete(socket);
      tunnels.delete(socket);
    });
  });
  server.on('upgrade', (_req: http.IncomingMessage, socket: net.Socket) => {
    // No longer HTTP: the socket now carries a WebSocket to realtime.
    sockets.delete(socket);
    if (!socket.destroyed) tunnels.add(socket);
  });
  // Runs before the application's listener, so the header is decided before any handler writes.
  server.prependListener('request', (req: http.IncomingMessage, res: http.ServerResponse) => {
    const state = sockets.get(req.socket);
    if (state) state.inFlight++;
    if (draining) res.shouldKeepAlive = false;
    else open.add(res);
    res.once('close', () => {
      open.delete(res);
      if (!state) return;
      state.inFlight--;
      state.quietSince = Date.now();
      state.bytesRead = req.socket.bytesRead;
    });
  });

  let drained: Promise<DrainResult> | undefined;
  function run(deadlineMs: number): Promise<DrainResult> {
    const started = Date.now();
    draining = true;
    for (const res of open) if (!res.headersSent) res.shouldKeepAlive = false;
    open.clear();
    for (const state of sockets.values()) state.quietSince = started;
    let cut = 0;
    let tunnelCount = 0;
    const closeTunnels = () => {
      tunnelCount += tunnels.size;
      for (const socket of tunnels) socket.destroy();
      tunnels.clear();
    };
    const sweep = () => {
      const now = Date.now();
      if (now - started >= deadlineMs) {
        clearInterval(sweeper);
        for (const [socket, state] of sockets) {
          if (state.inFlight > 0) cut++;
          socket.destroy();
        }
        if (cut) logger.warn({ cut, deadlineMs }, 'drain deadline reached: requests still in flight were cut');
        closeTunnels();
        return;
      }
      for (const [socket, state] of sockets) {
        if (state.inFlight > 0) continue;
        // Bytes of a request whose headers are not complete yet count as activity.
        if (socket.bytesRead !== state.bytesRead) {
          state.bytesRead = socket.bytesRead;
          state.quietSince = now;
          continue;
        }
        if (now - state.quietSince >= idleGraceMs) socket.destroy();
      }
      if (sockets.size === 0 && tunnels.size) closeTunnels();
    };
    const sweeper = setInterval(sweep, SWEEP_MS);
    return new Promise<DrainResult>((resolve) => {
      // net.Server's close, not http.Server's: the latter also destroys every idle socket at once.
      net.Server.prototype.close.call(server, () => {
        clearInterval(sweeper);
        resolve({ ms: Date.now() - started, cut, tunnels: tunnelCount });
      });
      sweep();
    });
  }

  return {
    drain(deadlineMs) {
      drained ??= run(deadlineMs);
      return drained;
    },
  };
}
