import net from 'node:net';

export interface RawResponse {
  /** 0 when the server sent nothing parseable. */
  status: number;
  headers: Record<string, string>;
  /** The body parsed as JSON, or the text when it is not JSON. */
  body: any;
  /** Every byte received, as latin1 text. */
  raw: string;
  /** Whether the server closed the connection within the wait. */
  closed: boolean;
}

/**
 * Sends `request` as bytes on a fresh TCP connection and collects what comes back until the server
 * closes or `waitMs` passes. For what fetch refuses to send: invalid method tokens, TRACE, broken
 * chunking, oversize headers, hand-made WebSocket handshakes.
 */
export function rawRequest(port: number, request: string | Buffer, waitMs = 10_000): Promise<RawResponse> {
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    const socket = net.connect(port, '127.0.0.1', () => socket.write(request));
    let done = false;
    const finish = (closed: boolean) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      socket.destroy();
      resolve(parseResponse(Buffer.concat(chunks).toString('latin1'), closed));
    };
    const timer = setTimeout(() => finish(false), waitMs);
    socket.on('data', (d) => chunks.push(d));
    socket.on('close', () => finish(true));
    socket.on('error', () => undefined);
  });
}

function parseResponse(raw: string, closed: boolean): RawResponse {
  const m = /^HTTP\/1\.[01] (\d{3})[^\r\n]*\r\n([\s\S]*?)\r\n\r\n([\s\S]*)$/.exec(raw);
  if (!m) return { status: 0, headers: {}, body: undefined, raw, closed };
  const headers: Record<string, string> = {};
  for (const line of m[2].split('\r\n')) {
    const i = line.indexOf(':');
    if (i > 0) headers[line.slice(0, i).trim().toLowerCase()] = line.slice(i + 1).trim();
  }
  const text = Buffer.from(m[3], 'latin1').toString('utf8');
  let body: unknown = text;
  try {
    body = text ? JSON.parse(text) : undefined;
  } catch {
    /* not JSON */
  }
  return { status: Number(m[1]), headers, body, raw, closed };
}
