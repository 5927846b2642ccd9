import WebSocket from 'ws';
import { decodeEnvelope, encodeEnvelope, Envelope, PayloadCase } from '../../shared/proto';
import type { Stack } from './stack';

/** A received frame: JSON text parsed, binary decoded as WsEnvelope. */
export type Frame = { kind: 'json'; data: any; raw: string } | { kind: 'binary'; env: Envelope; raw: Buffer };

export interface ConnectOptions {
  token?: string;
  protocols?: string[];
  headers?: Record<string, string>;
  /** Path and query after the host (default /v1/ws). */
  path?: string;
  autoPong?: boolean;
}

/** ws:// URL of the api port (forwarded) or, with `instance`, of one realtime instance directly. */
export function wsBase(s: Stack, instance?: number): string {
  if (instance === undefined) return s.url.replace(/^http/, 'ws');
  return `ws://127.0.0.1:${s.realtime[instance].port}`;
}

/** A test WebSocket client that queues every frame and lets tests await the next matching one. */
export class WsConn {
  readonly frames: Frame[] = [];
  private waiters: Array<{ match: (f: Frame) => boolean; resolve: (f: Frame) => void }> = [];
  readonly closed: Promise<{ code: number; reason: string }>;

  constructor(readonly ws: WebSocket) {
    ws.on('message', (data: Buffer, isBinary: boolean) => {
      const f: Frame = isBinary
        ? { kind: 'binary', env: decodeEnvelope(data), raw: data }
        : { kind: 'json', data: JSON.parse(data.toString()), raw: data.toString() };
      const i = this.waiters.findIndex((w) => w.match(f));
      if (i >= 0) this.waiters.splice(i, 1)[0].resolve(f);
      else this.frames.push(f);
    });
    this.closed = new Promise((resolve) =>
      ws.on('close', (code, reason) => resolve({ code, reason: reason.toString() })),
    );
  }

  /** The next frame (already queued or arriving) matching `match`; rejects after `timeoutMs`. */
  next(match: (f: Frame) => boolean = () => true, timeoutMs = 5000): Promise<Frame> {
    const i = this.frames.findIndex(match);
    if (i >= 0) return Promise.resolve(this.frames.splice(i, 1)[0]);
    return new Promise((resolve, reject) => {
      const w = { match, resolve: (f: Frame) => (clearTimeout(timer), resolve(f)) };
      const timer = setTimeout(() => {
        this.waiters = this.waiters.filter((x) => x !== w);
        reject(
          new Error(
            `no matching frame within ${timeoutMs} ms; queued: ${JSON.stringify(this.frames.map((f) => (f.kind === 'json' ? f.data : f.env)))}`,
          ),
        );
      }, timeoutMs);
      this.waiters.push(w);
    });
  }

  async nextJson(match: (m: any) => boolean = () => true, timeoutMs?: number): Promise<any> {
    const f = await this.next((f) => f.kind === 'json' && match(f.data), timeoutMs);
    return (f as { data: any }).data;
  }

  async nextEnvelope(match: (e: Envelope) => boolean = () => true, timeoutMs?: number): Promise<Envelope> {
    const f = await this.next((f) => f.kind === 'binary' && match(f.env), timeoutMs);
    return (f as { env: Envelope }).env;
  }

  /** Resolves true if no matching frame arrives within `ms`. */
  async nothing(match: (f: Frame) => boolean = () => true, ms = 300): Promise<boolean> {
    try {
      await this.next(match, ms);
      return false;
    } catch {
      return true;
    }
  }

  json(msg: unknown): void {
    this.ws.send(JSON.stringify(msg));
  }

  envelope(payload: PayloadCase, body: Record<string, unknown>, requestId?: string): void {
    this.ws.send(encodeEnvelope(payload, body, requestId));
  }

  /** Subscribes over JSON and returns the server's reply. */
  async subscribe(channel: string): Promise<any> {
    this.json({ type: 'subscribe', channel });
    return this.nextJson((m) => (m.type === 'message' && m.channel === channel) || m.type === 'error');
  }

  close(): void {
    this.ws.close();
  }
}

function build(base: string, o: ConnectOptions): WebSocket {
  const headers: Record<string, string> = { ...(o.headers ?? {}) };
  if (o.token) headers.authorization = `Bearer ${o.token}`;
  return new WebSocket(base + (o.path ?? '/v1/ws'), o.protocols ?? [], { headers, autoPong: o.autoPong ?? true });
}

/** Opens a connection and waits for it to be open. */
export function connect(base: string, o: ConnectOptions = {}): Promise<WsConn> {
  const ws = build(base, o);
  const conn = new WsConn(ws);
  return new Promise((resolve, reject) => {
    ws.once('open', () => resolve(conn));
    ws.once('unexpected-response', (_req, res) => reject(new Error(`upgrade refused with ${res.statusCode}`)));
    ws.once('error', reject);
  });
}

/** Attempts an upgrade that should be refused; resolves with the HTTP status and JSON body. */
export function refusedUpgrade(base: string, o: ConnectOptions = {}): Promise<{ status: number; body: any }> {
  const ws = build(base, o);
  return new Promise((resolve, reject) => {
    ws.once('open', () => {
      ws.close();
      reject(new Error('upgrade unexpectedly accepted'));
    });
    ws.once('unexpected-response', (_req, res) => {
      let text = '';
      res.on('data', (d: Buffer) => (text += d.toString()));
      res.on('end', () => {
        let body: unknown = text;
        try {
          body = JSON.parse(text);
        } catch {
          /* not JSON */
        }
        resolve({ status: res.statusCode ?? 0, body });
      });
    });
    ws.once('error', () => undefined);
  });
}

/** Publishes a pre-serialised push the way EventBus does. */
export async function publish(s: Stack, channel: string, message: unknown): Promise<void> {
  await s.api.services.bus.publish(channel, message as never);
}

/** Minimal protobuf wire reader: field number → raw values (varints as numbers, bytes as Buffers). */
export function wire(buf: Uint8Array): Map<number, Array<number | Buffer>> {
  const out = new Map<number, Array<number | Buffer>>();
  let i = 0;
  const varint = () => {
    let v = 0;
    let mul = 1;
    for (;;) {
      const b = buf[i++];
      v += (b & 0x7f) * mul;
      if (b < 0x80) return v;
      mul *= 128;
    }
  };
  while (i < buf.length) {
    const tag = varint();
    const field = Math.floor(tag / 8);
    const wt = tag & 7;
    let value: number | Buffer;
    if (wt === 0) value = varint();
    else if (wt === 2) {
      const len = varint();
      value = Buffer.from(buf.subarray(i, i + len));
      i += len;
    } else if (wt === 1) {
      value = Buffer.from(buf.subarray(i, i + 8));
      i += 8;
    } else if (wt === 5) {
      value = Buffer.from(buf.subarray(i, i + 4));
      i += 4;
    } else throw new Error(`wire type ${wt}`);
    if (!out.has(field)) out.set(field, []);
    out.get(field)!.push(value);
  }
  return out;
}
