import http from 'node:http';
import type { Duplex } from 'node:stream';
import { errorName } from './errors';
import { isRoutePath } from './routePaths';

/** The one WebSocket path (api forwards it, realtime serves it). */
export const WS_PATH = '/v1/ws';

/** How long a refused connection keeps draining what the client still sends before it is cut. */
const LINGER_MS = 1000;
/** Marks a socket already answered: the parser reports an error again for every later chunk. */
const REFUSED = Symbol('refused');

/**
 * Ends `socket` after `last`, reading and dropping what the client still sends for a moment before
 * cutting it: closing with unread data would reset the connection, and a reset can make the client
 * lose the bytes just written (an error answer, a WebSocket close frame).
 */
export function closeLingering(socket: Duplex, last?: string | Buffer): void {
  socket.on('error', () => socket.destroy());
  socket.end(last);
  socket.resume();
  setTimeout(() => socket.destroy(), LINGER_MS).unref();
}

/**
 * Answers on a raw socket (no Koa, no ServerResponse: parser errors, refused upgrades) with the
 * usual `{error, message}` body, then closes (lingering).
 */
export function refuseSocket(
  socket: Duplex,
  status: number,
  message: string,
  headers: Record<string, string> = {},
): void {
  const s = socket as Duplex & { [REFUSED]?: boolean };
  if (s[REFUSED] || socket.destroyed) return;
  s[REFUSED] = true;
  const body = JSON.stringify({ error: errorName(status), message });
  const lines = [
    `HTTP/1.1 ${status} ${http.STATUS_CODES[status] ?? 'Error'}`,
    'Content-Type: application/json; charset=utf-8',
    'Cache-Control: no-store',
    'X-Content-Type-Options: nosniff',
    `Content-Length: ${Buffer.byteLength(body)}`,
    'Connection: close',
    ...Object.entries(headers).map(([k, v]) => `${k}: ${v}`),
  ];
  closeLingering(socket, `${lines.join('\r\n')}\r\n\r\n${body}`);
}

/** The status and message for an error of Node's HTTP parser (llhttp codes). */
function parserErrorAnswer(err: NodeJS.ErrnoException): [number, string] {
  switch (err.code) {
    case 'HPE_HEADER_OVERFLOW': {
      // A request line that has not ended within the limit is a URL too long, not headers (RFC 9110 §15.5.15).
      const start = (err as { rawPacket?: Buffer }).rawPacket?.subarray(0, 16 * 1024 + 64).toString('latin1') ?? '';
      if (/^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,32} [^\r\n]{1024,}$/.test(start))
        return [414, 'request URL too long (with the headers, 16 KB at most)'];
      return [431, 'request headers too large (16 KB at most)'];
    }
    case 'ERR_HTTP_REQUEST_TIMEOUT':
      return [408, 'the request was not received in time'];
    case 'HPE_INVALID_METHOD': {
      // A well-formed request line whose method this server does not know is not implemented
      // (RFC 9110 §9.1: 501); anything else is a malformed request.
      const method = /^([!#$%&'*+.^_`|~0-9A-Za-z-]{1,32}) [!-~]+ HTTP\/\d\.\d\r?\n/.exec(
        (err as { rawPacket?: Buffer }).rawPacket?.subarray(0, 16 * 1024).toString('latin1') ?? '',
      )?.[1];
      return method
        ? [501, `method ${method} is not implemented (methods are case-sensitive)`]
        : [400, 'malformed request method'];
    }
    case 'HPE_INVALID_VERSION': {
      // A well-formed request line of another HTTP version (HTTP/3.0, HTTP/1.2: Node's parser
      // takes 1.0, 1.1 and, for requestHeadProblem's 505, 0.9 and 2.0 only): 505 too (RFC 9110 §15.6.6).
      const version = /^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,32} [!-~]+ HTTP\/(\d{1,3}\.\d{1,3})\r?\n/.exec(
        (err as { rawPacket?: Buffer }).rawPacket?.subarray(0, 16 * 1024).toString('latin1') ?? '',
      )?.[1];
      return version
        ? [505, `HTTP/${version} is not supported: use HTTP/1.1`]
        : [400, 'malformed HTTP version in the request line'];
    }
    case 'HPE_INVALID_CHUNK_SIZE':
    case 'HPE_INVALID_TRANSFER_ENCODING':
    case 'HPE_UNEXPECTED_CONTENT_LENGTH':
    case 'HPE_INVALID_CONTENT_LENGTH':
      return [400, 'malformed request body framing (Content-Length / Transfer-Encoding)'];
    default:
      return [400, 'malformed HTTP request'];
  }
}

/**
 * The request timeouts of an HTTP server (api and realtime alike): HTTP_REQUEST_TIMEOUT_MS for
 * the whole request and a third of it, at most 10 s, for its headers (Node's defaults, 300 s and
 * 60 s, let a slow sender hold a connection and its request for minutes), checked every second
 * (not every 30 s): a 408, never a hang.
 */
export function requestTimeouts(requestTimeout: number) {
  return {
    requestTimeout,
    headersTimeout: Math.min(10_000, Math.ceil(requestTimeout / 3)),
    connectionsCheckingInterval: Math.min(1000, requestTimeout),
  };
}

/**
 * Requests Node rejects before any handler runs get a JSON answer like every other error: parser
 * errors (invalid method token, oversize headers → 431, broken chunking → 400) through
 * `clientError`, CONNECT (which Node would otherwise drop silently) a 405, and an Expect Node
 * does not meet a 417 (a request head Node lets through: `refuseBadRequestHead`).
 */
export function answerMalformedRequests(server: http.Server): void {
  server.on('clientError', (err: NodeJS.ErrnoException, socket: Duplex) => {
    // Nothing to answer on a connection the client reset, or once a response has started.
    const s = socket as Duplex & { _httpMessage?: http.ServerResponse; [REFUSED]?: boolean };
    if (s[REFUSED]) return;
    if (err.code === 'ECONNRESET' || !socket.writable || s._httpMessage?.headersSent) return void socket.destroy();
    // Bytes after a request that asked for Connection: close (a request pipelined behind it): not
    // read, not run, and not an error to answer. The socket closes after that request's own answer,
    // which a refusal here would have cut off although its request was run (a POST stored).
    if (err.code === 'HPE_CLOSED_CONNECTION' && s._httpMessage) return;
    const [status, message] = parserErrorAnswer(err);
    refuseSocket(socket, status, message);
  });
  server.on('connect', (_req: http.IncomingMessage, socket: Duplex) => {
    refuseSocket(socket, 405, 'CONNECT is not supported: this is not a proxy', { Allow: '' });
  });
  // An Expect other than 100-continue (which Node answers itself): Node's own 417 has no body.
  server.on('checkExpectation', (req: http.IncomingMessage, res: http.ServerResponse) => {
    answerRefusal(
      res,
      417,
      `Expect: '${String(req.headers.expect).slice(0, 40)}' is not supported (only 100-continue)`,
    );
  });
}

/**
 * A Host header's value (RFC 9110 §7.2, RFC 3986 §3.2.2): a registered name, an IPv4 address or an
 * IP literal in brackets, with an optional port. An empty value is allowed (an authority-less URI).
 */
const HOST_VALUE = /^(?:[A-Za-z0-9\-._~!$&'()*+,;=%]*|\[[0-9A-Fa-f:.]+\])(?::\d{0,5})?$/;

/** How many lines of header `name` (lower case) a request carries. */
function headerLines(req: http.IncomingMessage, name: string): number {
  const raw = req.rawHeaders;
  let n = 0;
  for (let i = 0; i < raw.length; i += 2) if (raw[i].length === name.length && raw[i].toLowerCase() === name) n++;
  return n;
}

/**
 * Why a request's head cannot be served, before any handler runs (null: it can), as Node would
 * refuse some of them but with a JSON answer (Node's have no body):
 * - a major HTTP version other than 1 (`HTTP/2.0` in a request line): 505;
 * - an HTTP/1.1 request without Host, or any request with more than one Host line or a Host that is
 *   not a host and port: 400 (RFC 9112 §3.2: which host was meant cannot be known);
 * - a Transfer-Encoding other than a lone `chunked` (`gzip, chunked`): 501 (RFC 9112 §6.1), where
 *   it would have been read as if the coding were not there.
 */
export function requestHeadProblem(req: http.IncomingMessage): { status: number; message: string } | null {
  if (req.httpVersionMajor !== 1)
    return {
      status: 505,
      message: `HTTP/${req.httpVersionMajor}.${req.httpVersionMinor} is not supported: use HTTP/1.1`,
    };
  const host = req.headers.host;
  if (host === undefined) {
    if (req.httpVersionMinor >= 1) return { status: 400, message: 'Host: required in an HTTP/1.1 request' };
  } else if (headerLines(req, 'host') > 1) return { status: 400, message: 'Host: given more than once' };
  else if (!HOST_VALUE.test(host))
    return { status: 400, message: 'Host: not a host name or address with an optional port' };
  const coding = req.headers['transfer-encoding'];
  if (coding !== undefined && coding.trim().toLowerCase() !== 'chunked')
    return {
      status: 501,
      message: `Transfer-Encoding '${coding.slice(0, 40)}' is not implemented: send the body chunked or with a Content-Length (compress with Content-Encoding)`,
    };
  return null;
}

/**
 * Answers a request whose head `requestHeadProblem` refuses; the server is created with
 * `requireHostHeader: false` and its handler asks this first. True when it answered.
 */
export function refuseBadRequestHead(req: http.IncomingMessage, res: http.ServerResponse): boolean {
  const problem = requestHeadProblem(req);
  if (!problem) return false;
  answerRefusal(res, problem.status, problem.message);
  return true;
}

/** A JSON error answer written before any handler ran; the connection closes after it. */
function answerRefusal(res: http.ServerResponse, status: number, message: string): void {
  const body = JSON.stringify({ error: errorName(status), message });
  res.shouldKeepAlive = false;
  res.writeHead(status, {
    'Content-Type': 'application/json; charset=utf-8',
    'Cache-Control': 'no-store',
    'X-Content-Type-Options': 'nosniff',
    'Content-Length': Buffer.byteLength(body),
    Connection: 'close',
  });
  res.end(body);
}

/**
 * Why an upgrade request cannot become a WebSocket on WS_PATH, checked before any authentication
 * or forwarding so a bad handshake costs nothing and gets JSON (ws's own refusals are text/html).
 */
export function upgradeProblem(
  req: http.IncomingMessage,
): { status: number; message: string; headers?: Record<string, string> } | null {
  const head = requestHeadProblem(req);
  if (head) return head;
  const path = (req.url ?? '').split('?')[0];
  if (!isRoutePath(path, WS_PATH)) return { status: 404, message: `no WebSocket endpoint here; connect to ${WS_PATH}` };
  if (req.method !== 'GET')
    return { status: 405, message: 'a WebSocket handshake is a GET', headers: { Allow: 'GET' } };
  if ((req.headers.upgrade ?? '').toLowerCase() !== 'websocket')
    return { status: 400, message: 'Upgrade: only websocket is supported' };
  // RFC 6455 §4.1: a handshake is an HTTP/1.1 GET, without a body.
  if (req.httpVersionMinor < 1) return { status: 400, message: 'a WebSocket handshake needs HTTP/1.1' };
  if (carriesBody(req)) return { status: 400, message: 'a WebSocket handshake has no body' };
  if (!/^[+/0-9A-Za-z]{22}==$/.test(req.headers['sec-websocket-key'] ?? '')) {
    return { status: 400, message: 'Sec-WebSocket-Key: missing or not 16 base64-encoded bytes' };
  }
  const version = req.headers['sec-websocket-version'];
  if (version !== '13' && version !== '8') {
    return {
      status: 400,
      message: 'Sec-WebSocket-Version: must be 13 (8 is also accepted)',
      headers: { 'Sec-WebSocket-Version': '13, 8' },
    };
  }
  return null;
}

/**
 * Whether a request carries more than one Authorization line. Node keeps only the first, and a
 * proxy may keep another: two credentials are refused (401), never one of them guessed at.
 */
export function repeatsAuthorization(req: http.IncomingMessage): boolean {
  return headerLines(req, 'authorization') > 1;
}

/** Whether a request says it has a body (a Transfer-Encoding, or a Content-Length above 0). */
export function carriesBody(req: http.IncomingMessage): boolean {
  const declared = req.headers['content-length'];
  return req.headers['transfer-encoding'] !== undefined || (declared !== undefined && !/^0+$/.test(declared));
}

/** What a request to WS_PATH that is not a WebSocket handshake gets: 426 naming the protocol (RFC 9110 §15.5.22). */
export const UPGRADE_REQUIRED = {
  status: 426,
  headers: { Upgrade: 'websocket', Connection: 'Upgrade' },
  message: `connect with a WebSocket client to ${WS_PATH}`,
} as const;

/**
 * `server.listen`, rejecting with the error a listen fails with (the port in use, out of range, a
 * host that is not this machine's) instead of leaving it to crash the process as an unhandled
 * 'error' event: the entry point logs it (exitOnStartFailure).
 */
export function listen(server: http.Server, port: number, host: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const failed = (err: Error) => reject(err);
    server.once('error', failed);
    server.listen(port, host, () => {
      server.off('error', failed);
      resolve();
    });
  });
}
