import type { WsClientMessage, WsServerMessage } from '../wsMessages';
import { ApiClient, authorizationOf, CallAuth } from './http';

/**
 * The first-party WebSocket client of /v1/ws (spec §4.26), for Node and browsers. A user token is
 * traded for a single-use ticket (POST /v1/ws/ticket) before every connection and sent as the
 * subprotocols ['service-ticket', ticket]; the system key or an API key goes in the Authorization
 * header (Node only); { anonymous: true } connects without credential. Fail-closed like the REST
 * client: without an auth choice nothing connects. The connection is re-opened with exponential
 * backoff when it drops, and every channel is subscribed again, except after a close code of
 * 4001–4006 (docs/websocket.md: "do not reconnect with the same credential"): the client then stops
 * for good and emits `terminated`.
 */

/** Close codes after which the same credential must not reconnect (4001–4006, docs/websocket.md). */
export function isTerminalCloseCode(code: number): boolean {
  return code >= 4001 && code <= 4006;
}

/** The subset of the WebSocket interface used (the browser's, or the `ws` package's in Node). */
export interface SocketLike {
  readonly readyState: number;
  binaryType: string;
  send(data: string | Uint8Array): void;
  close(code?: number, reason?: string): void;
  onopen: ((ev: unknown) => void) | null;
  onclose: ((ev: { code: number; reason: string }) => void) | null;
  onerror: ((ev: unknown) => void) | null;
  onmessage: ((ev: { data: unknown }) => void) | null;
}
export type SocketFactory = (url: string, protocols: string[], headers: Record<string, string>) => SocketLike;

export interface WsClientOptions {
  /** http(s) base URL of the api (the socket is at /v1/ws on the same origin). */
  baseUrl: string;
  auth: CallAuth;
  /** Opens a socket; default: the global WebSocket (browsers, Node ≥ 22), which cannot send headers. */
  socket?: SocketFactory;
  fetch?: typeof fetch;
  /** Backoff: first delay and ceiling in ms (default 250 and 10 000). */
  minDelayMs?: number;
  maxDelayMs?: number;
}

type Listener<T> = (value: T) => void;

/** A close frame's code and reason. */
export interface WsCloseInfo {
  code: number;
  reason: string;
}

export class WsClient {
  private socket?: SocketLike;
  private readonly channels = new Set<string>();
  private attempt = 0;
  private stopped = false;
  private timer?: ReturnType<typeof setTimeout>;
  private readonly listeners = {
    message: new Set<Listener<WsServerMessage>>(),
    binary: new Set<Listener<Uint8Array>>(),
    open: new Set<Listener<number>>(),
    close: new Set<Listener<WsCloseInfo>>(),
    error: new Set<Listener<Error>>(),
    /** The server closed with 4001–4006: the client will not reconnect (after `close`, once). */
    terminated: new Set<Listener<WsCloseInfo>>(),
  };
  /** Connections opened so far (1 after the first, +1 per reconnect). */
  opens = 0;
  /**
   * Set when the server closed with 4001–4006 (the credential is dead: revoked, expired, the account
   * deleted or banned…): the client stopped and will not reconnect; sign in again and make a new
   * client (or call connect() with a credential that works). Cleared by connect().
   */
  terminated?: WsCloseInfo;

  constructor(private readonly o: WsClientOptions) {}

  on<K extends keyof WsClient['listeners']>(
    event: K,
    fn: WsClient['listeners'][K] extends Set<infer L> ? L : never,
  ): () => void {
    const set = this.listeners[event] as Set<typeof fn>;
    set.add(fn);
    return () => set.delete(fn);
  }

  /** Opens the connection (and keeps it open until close()). Rejects with AUTH_REQUIRED without an auth choice. */
  async connect(): Promise<void> {
    if (!authorizationOf(this.o.auth)) throw Object.assign(new Error('AUTH_REQUIRED'), { status: 401 });
    this.stopped = false;
    this.terminated = undefined;
    await this.open();
  }

  /** Subscribes now (when connected) and after every reconnect. */
  subscribe(channel: string): void {
    this.channels.add(channel);
    this.sendJson({ type: 'subscribe', channel });
  }

  unsubscribe(channel: string): void {
    this.channels.delete(channel);
    this.sendJson({ type: 'unsubscribe', channel });
  }

  sendJson(msg: WsClientMessage): boolean {
    if (this.socket?.readyState !== 1) return false;
    this.socket.send(JSON.stringify(msg));
    return true;
  }

  /** Sends an encoded protobuf WsEnvelope (shared/proto encodeEnvelope in Node). */
  sendBinary(bytes: Uint8Array): boolean {
    if (this.socket?.readyState !== 1) return false;
    this.socket.send(bytes);
    return true;
  }

  close(): void {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    this.socket?.close(1000, 'client closed');
  }

  private emit<K extends keyof WsClient['listeners']>(event: K, value: unknown): void {
    for (const fn of this.listeners[event]) (fn as Listener<unknown>)(value);
  }

  private async credentials(): Promise<{ protocols: string[]; headers: Record<string, string> }> {
    const auth = this.o.auth;
    if ('anonymous' in auth) return { protocols: [], headers: {} };
    if ('systemKey' in auth) return { protocols: [], headers: { authorization: `Bearer ${auth.systemKey}` } };
    const api = new ApiClient({ baseUrl: this.o.baseUrl, fetch: this.o.fetch });
    const r = await api.request<{ ticket: string }>('POST', '/v1/ws/ticket', { auth });
    if (r.status !== 201) throw Object.assign(new Error(`ticket refused: ${r.status} ${r.text}`), { status: r.status });
    return { protocols: ['service-ticket', r.body.ticket], headers: {} };
  }

  private open(): Promise<void> {
    return this.credentials().then(({ protocols, headers }) => {
      const url = `${this.o.baseUrl.replace(/^http/, 'ws').replace(/\/$/, '')}/v1/ws`;
      const factory: SocketFactory =
        this.o.socket ??
        ((u, p) =>
          new (globalThis as unknown as { WebSocket: new (u: string, p: string[]) => SocketLike }).WebSocket(u, p));
      const socket = factory(url, protocols, headers);
      socket.binaryType = 'arraybuffer';
      this.socket = socket;
      return new Promise<void>((resolve, reject) => {
        let opened = false;
        socket.onopen = () => {
          opened = true;
          this.attempt = 0;
          this.opens++;
          for (const channel of this.channels) socket.send(JSON.stringify({ type: 'subscribe', channel }));
          this.emit('open', this.opens);
          resolve();
        };
        socket.onmessage = (ev) => {
          if (typeof ev.data === 'string') {
            try {
              this.emit('message', JSON.parse(ev.data) as WsServerMessage);
            } catch {
              this.emit('error', new Error('unparsable JSON frame'));
            }
          } else this.emit('binary', new Uint8Array(ev.data as ArrayBuffer));
        };
        socket.onerror = () => {
          if (!opened) reject(new Error('WebSocket connection failed'));
        };
        socket.onclose = (ev) => {
          const info: WsCloseInfo = { code: ev.code, reason: ev.reason };
          // Set before the listeners run, so a close listener already sees that this one is final.
          const terminal = isTerminalCloseCode(ev.code) && !this.stopped;
          if (terminal) {
            this.stopped = true;
            if (this.timer) clearTimeout(this.timer);
            this.timer = undefined;
            this.terminated = info;
          }
          this.emit('close', info);
          if (!opened) reject(new Error(`WebSocket closed before opening (${ev.code})`));
          if (terminal) this.emit('terminated', info);
          else this.scheduleReconnect();
        };
      });
    });
  }

  /** Stops for good after a reconnect refused for its credential, as a close with `info.code` would. */
  private terminate(info: WsCloseInfo): void {
    if (this.stopped) return;
    this.stopped = true;
    this.terminated = info;
    this.emit('terminated', info);
  }

  /** Exponential backoff with jitter, from minDelayMs up to maxDelayMs; a new ticket each time. */
  private scheduleReconnect(): void {
    if (this.stopped || this.timer) return;
    const min = this.o.minDelayMs ?? 250;
    const delay = Math.min(this.o.maxDelayMs ?? 10_000, min * 2 ** this.attempt++) * (0.75 + Math.random() / 2);
    this.timer = setTimeout(() => {
      this.timer = undefined;
      if (this.stopped) return;
      this.open().catch((e: Error & { status?: number }) => {
        this.emit('error', e);
        // A reconnect whose credential is refused (the ticket answered 401: the session was revoked
        // while the connection was down) is as final as a close with 4001.
        if (e.status === 401) return this.terminate({ code: 4001, reason: e.message });
        this.scheduleReconnect();
      });
    }, delay);
  }
}
