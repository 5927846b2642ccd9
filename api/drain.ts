import type http from 'node:http';
import net from 'node:net';
import type { Duplex } from 'node:stream';
import type { Logger } from '../shared/logger';
import { loggedPath } from './middleware/errors';

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
/**
 * How long before the drain's deadline the waits of requests on work done elsewhere end (a queued
 * job such as the data export, the chat bot: `endWaits`), at most a quarter of the deadline. Such a
 * request may wait far longer than the drain lasts (an export up to 60 s, a member sync 60 s): it
 * then answers what its timeout answers (an audited 503 with Retry-After, a sync's success false),
 * with the time left to write it, rather than being cut without an answer. Not at the start of the
 * drain: a job that finishes within the deadline (an export takes a few seconds) is delivered.
 */
export const DRAIN_WAITS_MARGIN_MS = 1000;

interface SocketState {
  /**
   * Responses of the requests received on the socket and not yet answered (more than one when
   * pipelined). Kept per socket rather than in one Set of every open response: a Set added to and
   * deleted from on every request rehashes every few dozen requests, and V8 links each rehashed
   * table to its successor. Once an old table was promoted, that chain kept every later response
   * (and its request, headers and context) alive through every scavenge until the next full GC:
   * 17% of all the api's allocation survived, and each scavenge paused requests for 25-35 ms
   * (README "Hot paths", "Garbage").
   */
  open: http.ServerResponse[];
  /** Last moment something happened on the socket: a response ended or bytes arrived. */
  quietSince: number;
  bytesRead: number;
}

export interface DrainResult {
  ms: number;
  /** Sockets destroyed at the deadline with a request still in flight. */
  cut: number;
  /** WebSocket tunnels to realtime that were closed (their clients got 1012 and reconnect). */
  tunnels: number;
}

/** Ends one WebSocket tunnel at the drain: gently (a close frame, then the socket); the deadline destroys what is left. */
export type TunnelClose = () => void;

export interface HttpDrain {
  /**
   * Whether a request must not be run: it was pipelined behind an answer that already went out as
   * its socket's last (`Connection: close`), so no answer of it could ever reach the client. Not
   * running it is what tells the client it may send it again (RFC 9112 §9.3.2); running it would
   * store a POST whose client never hears so.
   */
  unanswerable(req: http.IncomingMessage): boolean;
  /**
   * Stops accepting connections and closes every socket once it has nothing to answer: responses
   * from now on carry `Connection: close` (Node ends the socket after them), idle keep-alive
   * sockets are closed after DRAIN_IDLE_GRACE_MS of quiet. Upgraded sockets (WebSocket tunnels)
   * are ended once no HTTP socket is left, the way `onTunnelClose` said (a forwarded WebSocket gets
   * a close frame 1012). Shortly before `deadlineMs` (DRAIN_WAITS_MARGIN_MS) requests still waiting
   * for work done elsewhere are made to answer (`endWaits`); at `deadlineMs` whatever remains is
   * destroyed, and logged with the method and route of each request cut.
   * Resolves when the server is closed; later calls return the same promise.
   */
  drain(deadlineMs: number): Promise<DrainResult>;
  /**
   * How the drain ends the upgraded `socket` (the forwarding sets it; without it the socket is
   * destroyed). Called once, when the tunnels are closed; `socket` stays counted until it closes.
   */
  onTunnelClose(socket: Duplex, close: TunnelClose): void;
}

export interface DrainOptions {
  idleGraceMs?: number;
  /** Ends the waits of requests on work done elsewhere (ServiceContext.endWaits); called once, near the deadline. */
  endWaits?: () => void;
  /**
   * The route pattern a request matches (`/v1/sessions/:token`), never the values in its path (they
   * may be credentials); when undefined, its first two segments are logged (loggedPath).
   */
  routeOf?: (method: string, path: string) => string | undefined;
}

/** Tracks the connections and in-flight requests of `server` so that it can be drained without resetting a request. */
export function trackConnections(server: http.Server, logger: Logger, opts: DrainOptions = {}): HttpDrain {
  const idleGraceMs = opts.idleGraceMs ?? DRAIN_IDLE_GRACE_MS;
  // What the cut line says of a request: its method and route.
  const describe = (res: http.ServerResponse) => {
    const method = res.req.method ?? '';
    const path = (res.req.url ?? '').split('?')[0];
    return { method, route: opts.routeOf?.(method, path) ?? loggedPath({ path }) };
  };
  const sockets = new Map<net.Socket, SocketState>();
  // Upgraded sockets still open, with how the drain ends them (undefined once it was asked to).
  const tunnels = new Map<Duplex, TunnelClose | undefined>();
  // Responses on sockets this tracker never saw connect (none in practice): switched to Connection:
  // close when the drain begins, like the open responses of every tracked socket.
  const untracked = new Set<http.ServerResponse>();
  let draining = false;
  // Responses this drain switched to Connection: close: the last one of each socket. When another
  // pipelined request arrives behind it before its headers are out, the close moves on to it.
  const closedByDrain = new WeakSet<http.ServerResponse>();
  const unanswerable = new WeakSet<http.IncomingMessage>();
  const closeLast = (res: http.ServerResponse) => {
    if (res.headersSent || !res.shouldKeepAlive) return;
    res.shouldKeepAlive = false;
    closedByDrain.add(res);
  };

  server.on('connection', (socket: net.Socket) => {
    sockets.set(socket, { open: [], quietSince: Date.now(), bytesRead: 0 });
    socket.once('close', () => {
      sockets.delete(socket);
      tunnels.delete(socket);
    });
  });
  server.on('upgrade', (_req: http.IncomingMessage, socket: net.Socket) => {
    // No longer HTTP: the socket now carries a WebSocket to realtime.
    sockets.delete(socket);
    if (!socket.destroyed) tunnels.set(socket, () => socket.destroy());
  });
  // Runs before the application's listener, so the header is decided before any handler writes.
  server.prependListener('request', (req: http.IncomingMessage, res: http.ServerResponse) => {
    const state = sockets.get(req.socket);
    if (state) {
      for (const earlier of state.open) {
        if (earlier.shouldKeepAlive) continue;
        if (earlier.headersSent || !closedByDrain.has(earlier)) {
          // The socket ends after that answer (the drain's close is out, or the client asked for it):
          // this request is never answered, so it must not run either.
          unanswerable.add(req);
        } else {
          // Only the socket's last answer says Connection: close, or Node ends the socket after the
          // first and drops the answers of the requests pipelined behind it, which have run.
          earlier.shouldKeepAlive = true;
          closedByDrain.delete(earlier);
        }
      }
    }
    if (draining) closeLast(res);
    if (state) state.open.push(res);
    else if (!draining) untracked.add(res);
    res.once('close', () => {
      if (!state) return void untracked.delete(res);
      // Usually the first (the only one without pipelining).
      const i = state.open.indexOf(res);
      if (i !== -1) state.open.splice(i, 1);
      state.quietSince = Date.now();
      state.bytesRead = req.socket.bytesRead;
    });
  });

  let drained: Promise<DrainResult> | undefined;
  function run(deadlineMs: number): Promise<DrainResult> {
    const started = Date.now();
    draining = true;
    // Responses whose headers may still be sent keep-alive: from now on they say Connection: close.
    for (const res of untracked) closeLast(res);
    untracked.clear();
    for (const state of sockets.values()) {
      // The socket's last open answer says Connection: close; those before it keep the socket open
      // for the answers behind them (pipelining).
      const last = state.open[state.open.length - 1];
      if (last) closeLast(last);
      state.quietSince = started;
    }
    let cut = 0;
    let tunnelCount = 0;
    const waitsEndAt = started + deadlineMs - Math.min(DRAIN_WAITS_MARGIN_MS, deadlineMs / 4);
    let waitsEnded = false;
    // Each tunnel is ended once and stays tracked until its socket closes (the close frame and the
    // client's answer take a round trip); the deadline destroys those still open.
    const closeTunnels = () => {
      for (const [socket, close] of tunnels) {
        if (!close) continue;
        tunnels.set(socket, undefined);
        tunnelCount++;
        close();
      }
    };
    const sweep = () => {
      const now = Date.now();
      if (now - started >= deadlineMs) {
        clearInterval(sweeper);
        const requests: Array<{ method: string; route: string }> = [];
        for (const [socket, state] of sockets) {
          if (state.open.length > 0) cut++;
          for (const res of state.open) requests.push(describe(res));
          socket.destroy();
        }
        if (cut)
          logger.warn({ cut, deadlineMs, requests }, 'drain deadline reached: requests still in flight were cut');
        closeTunnels();
        for (const socket of tunnels.keys()) socket.destroy();
        return;
      }
      if (!waitsEnded && now >= waitsEndAt) {
        waitsEnded = true;
        let inFlight = 0;
        for (const state of sockets.values()) inFlight += state.open.length;
        if (inFlight)
          logger.info(
            { inFlight, deadlineMs },
            'drain deadline near: requests waiting on a job or the chat bot answer now',
          );
        opts.endWaits?.();
      }
      for (const [socket, state] of sockets) {
        if (state.open.length > 0) continue;
        // Bytes of a request whose headers are not complete yet count as activity.
        if (socket.bytesRead !== state.bytesRead) {
          state.bytesRead = socket.bytesRead;
          state.quietSince = now;
          continue;
        }
        if (now - state.quietSince >= idleGraceMs) socket.destroy();
      }
      if (sockets.size === 0) closeTunnels();
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
    unanswerable: (req) => unanswerable.has(req),
    onTunnelClose(socket, close) {
      if (tunnels.get(socket)) tunnels.set(socket, close);
    },
    drain(deadlineMs) {
      drained ??= run(deadlineMs);
      return drained;
    },
  };
}
