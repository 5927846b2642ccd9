import { WebSocket } from 'ws';
import type { Principal } from '../shared/policies';
import type { TicketData } from '../shared/auth/wsTickets';
import { CloseCode, FrameFormat } from './frames';

/** How a connection authenticated; kept so its principal can be re-resolved after a change. */
export type ConnectionAuth =
  | { kind: 'anonymous' }
  | { kind: 'bearer'; token: string }
  | { kind: 'ticket'; ticket: TicketData }
  /** System key acting for a user through ?userId= (spec §5.9 identity relay). */
  | { kind: 'relay'; systemToken: string; userId: string };

export interface Client {
  id: number;
  socket: WebSocket;
  principal: Principal;
  auth: ConnectionAuth;
  channels: Set<string>;
  /** Format of the last frame the client sent; replies and account events follow it. */
  format: FrameFormat;
  lastPong: number;
  windowStart: number;
  windowCount: number;
  /** X-Source-Service of a service client (e.g. chat_bot), else null. */
  sourceService: string | null;
  chatBot: boolean;
  /** Set once the server decided to close it: no more sends. */
  closing: boolean;
  recheck?: { running: boolean; again: boolean };
  /** Frames of other channels that arrived while `recheck` ran: sent after it, if still subscribed. */
  held?: Array<{ channel: string; frame: Buffer | Uint8Array; binary: boolean }>;
  /**
   * Frames the client sent while `recheck` ran: handled after it, with the principal it found (a
   * request sent after a narrowing change was acknowledged is judged by the narrowed access).
   */
  heldIncoming?: Array<{ buf: Buffer; isBinary: boolean }>;
  /** Why its credential stopped authenticating: set until the socket closes; every request is refused. */
  revoked?: string;
  /** Re-checks the connection when its credential expires (`Hub.expireAt`). */
  expiry?: NodeJS.Timeout;
}

/** Frames held for one connection while its access is re-checked; beyond this the oldest go. */
const MAX_HELD_FRAMES = 10_000;
/** setTimeout's longest delay; a later expiry is waited for in steps. */
const MAX_TIMER_MS = 2_147_483_647;

/** Time a client we closed gets to complete the close handshake before the socket is destroyed. */
const CLOSE_GRACE_MS = 5000;

/**
 * Connection state of one realtime instance: clients, channel membership and the indexes the
 * account events need. Sending goes through here so the bounded send buffer is enforced
 * everywhere: a client whose socket buffers more than `maxBufferedBytes` is disconnected (1013)
 * instead of growing the process's memory and delaying everyone else.
 */
export class Hub {
  readonly clients = new Set<Client>();
  readonly channels = new Map<string, Set<Client>>();
  /** User connections and connections of API keys owned by the user, by user id. */
  readonly byUser = new Map<string, Set<Client>>();
  readonly chatBots = new Set<Client>();
  subscriptionCount = 0;
  private nextId = 1;
  private onChange: () => void = () => undefined;

  constructor(private readonly maxBufferedBytes: number) {}

  /** Called after connection or subscription counts change (stats reporting). */
  setOnChange(fn: () => void): void {
    this.onChange = fn;
  }

  create(
    socket: WebSocket,
    principal: Principal,
    auth: ConnectionAuth,
    sourceService: string | null,
    chatBot: boolean,
  ): Client {
    const now = Date.now();
    const c: Client = {
      id: this.nextId++,
      socket,
      principal,
      auth,
      channels: new Set(),
      format: 'json',
      lastPong: now,
      windowStart: now,
      windowCount: 0,
      sourceService,
      chatBot,
      closing: false,
    };
    this.clients.add(c);
    const uid = ownerId(principal);
    if (uid) addTo(this.byUser, uid, c);
    if (chatBot) this.chatBots.add(c);
    this.onChange();
    return c;
  }

  remove(c: Client): void {
    if (!this.clients.delete(c)) return;
    clearTimeout(c.expiry);
    c.held = undefined;
    for (const ch of [...c.channels]) this.unsubscribe(c, ch);
    const uid = ownerId(c.principal);
    if (uid) removeFrom(this.byUser, uid, c);
    this.chatBots.delete(c);
    this.onChange();
  }

  subscribe(c: Client, channel: string): void {
    if (c.channels.has(channel)) return;
    c.channels.add(channel);
    addTo(this.channels, channel, c);
    this.subscriptionCount++;
    this.onChange();
  }

  unsubscribe(c: Client, channel: string): void {
    if (!c.channels.delete(channel)) return;
    removeFrom(this.channels, channel, c);
    this.subscriptionCount--;
    this.onChange();
  }

  /**
   * Whether a frame on `channel` must wait for `c`'s re-check (`hold`): while a change to its
   * access is being applied, only its own user channel (which carries the account events that
   * explain the change) goes straight through. A push published after the change was acknowledged
   * thus never reaches a connection that no longer may read it.
   */
  mustHold(c: Client, channel: string): boolean {
    return (
      (c.recheck !== undefined || (this.holdingAll && c.principal.kind !== 'anonymous')) &&
      !(c.principal.kind === 'user' && channel === `user:${c.principal.userId}`)
    );
  }

  /**
   * While the invalidation subscription cannot hear Redis, a narrowing change may go unheard: the
   * pushes of every authenticated connection wait (as during a re-check) until it hears again and
   * each connection has been re-checked (`AccountEvents.recheckAll`, which releases them). A push
   * published after the change answered thus never reaches a connection that lost its channel.
   */
  holdingAll = false;

  hold(c: Client, channel: string, frame: Buffer | Uint8Array, binary: boolean): void {
    const held = (c.held ??= []);
    held.push({ channel, frame, binary });
    if (held.length > MAX_HELD_FRAMES) held.shift();
  }

  /** After a re-check: the held frames of channels `c` still reads, in arrival order; the others are dropped. */
  release(c: Client): void {
    const held = c.held;
    c.held = undefined;
    if (held) {
      for (const h of held) {
        if (!c.channels.has(h.channel)) continue;
        if (h.binary) this.sendBinary(c, h.frame);
        else this.sendText(c, h.frame as Buffer);
      }
    }
    if (c.heldIncoming) this.onIncomingReleased(c);
    // Whatever it found (a bot that lost chat:sync is no bot any more): cheap when nothing waits.
    this.onBotReleased();
  }

  /** Handles the frames a client sent while its access was re-checked (set by the server). */
  onIncomingReleased: (c: Client) => void = () => undefined;

  /** A re-check ended: bot requests waiting for re-checks of chat bots go on (set by the server). */
  onBotReleased: () => void = () => undefined;

  /** Runs `onExpiry` once when `c`'s credential expires at `at` (ms; Infinity: never), replacing an earlier timer. */
  expireAt(c: Client, at: number, onExpiry: () => void): void {
    clearTimeout(c.expiry);
    c.expiry = undefined;
    if (!Number.isFinite(at) || !this.clients.has(c)) return;
    const delay = Math.max(0, at - Date.now());
    c.expiry = setTimeout(
      () => (delay > MAX_TIMER_MS ? this.expireAt(c, at, onExpiry) : onExpiry()),
      Math.min(delay, MAX_TIMER_MS),
    );
    c.expiry.unref();
  }

  /** Sends a text frame (JSON). `data` may be a pre-serialised Buffer shared by every receiver. */
  sendText(c: Client, data: string | Buffer): void {
    if (c.closing || c.socket.readyState !== WebSocket.OPEN) return;
    c.socket.send(data, { binary: false });
    this.checkBuffer(c);
  }

  /** Sends a binary frame (protobuf envelope). */
  sendBinary(c: Client, data: Uint8Array): void {
    if (c.closing || c.socket.readyState !== WebSocket.OPEN) return;
    c.socket.send(data, { binary: true });
    this.checkBuffer(c);
  }

  /** Sends a JSON message object. */
  sendJson(c: Client, msg: unknown): void {
    this.sendText(c, JSON.stringify(msg));
  }

  private checkBuffer(c: Client): void {
    if (c.socket.bufferedAmount > this.maxBufferedBytes)
      this.close(c, CloseCode.slowConsumer, 'slow consumer: send buffer overflow');
  }

  /**
   * Closes a client: no further sends, out of every channel at once, close frame queued after what
   * was already sent; destroyed if the handshake does not complete in time.
   */
  close(c: Client, code: number, reason: string): void {
    if (c.closing) return;
    c.closing = true;
    for (const ch of [...c.channels]) this.unsubscribe(c, ch);
    this.chatBots.delete(c);
    if (c.socket.readyState === WebSocket.OPEN || c.socket.readyState === WebSocket.CONNECTING) {
      c.socket.close(code, reason);
      setTimeout(() => c.socket.terminate(), CLOSE_GRACE_MS).unref();
    }
  }

  /** A chat bot whose credential lost chat:sync stops receiving bot requests. */
  demoteChatBot(c: Client): void {
    c.chatBot = false;
    this.chatBots.delete(c);
    this.onBotDemoted(c);
    this.onChange();
  }

  /** A chat bot lost its access: the requests it was serving fail (set by the server). */
  onBotDemoted: (c: Client) => void = () => undefined;

  /** Replaces a client's principal after re-resolution (the owner does not change). */
  setPrincipal(c: Client, p: Principal): void {
    c.principal = p;
  }

  stats(): { connections: number; subscriptions: number; chatBots: number } {
    return { connections: this.clients.size, subscriptions: this.subscriptionCount, chatBots: this.chatBots.size };
  }
}

/** The user a connection belongs to: the user, or the owner of a user API key. */
export function ownerId(p: Principal): string | null {
  if (p.kind === 'user') return p.userId;
  if (p.kind === 'apiKey') return p.userId;
  return null;
}

function addTo<K, V>(m: Map<K, Set<V>>, k: K, v: V): void {
  let s = m.get(k);
  if (!s) m.set(k, (s = new Set()));
  s.add(v);
}

function removeFrom<K, V>(m: Map<K, Set<V>>, k: K, v: V): void {
  const s = m.get(k);
  if (!s) return;
  s.delete(v);
  if (s.size === 0) m.delete(k);
}
