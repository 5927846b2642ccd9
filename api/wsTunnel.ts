import type net from 'node:net';
import type { Duplex } from 'node:stream';
import { closeLingering } from '../shared/httpEdge';
import { SERVICE_RESTART_CLOSE } from '../shared/wsMessages';

/** Longest HTTP answer head to an upgrade that is read as one (realtime's 101 is a few hundred bytes). */
const MAX_HEAD_BYTES = 16 * 1024;
const HEAD_END = Buffer.from('\r\n\r\n', 'latin1');

/**
 * Where the server→client bytes of a forwarded WebSocket stand: in realtime's HTTP answer to the
 * upgrade, inside a frame, or between two frames. Only frame headers are read (FIN/opcode byte,
 * 7-, 16- or 64-bit payload length, a mask if one is set); a payload is skipped by its length,
 * whatever the size of the chunks it arrives in, so the tunnel stays a byte pipe.
 */
export class ServerFrames {
  /** 'head' until realtime's answer head is complete; 'frames' after a 101; 'http' after a refusal (not WebSocket). */
  private phase: 'head' | 'frames' | 'http' = 'head';
  private head: Buffer = Buffer.alloc(0);
  private readonly header = Buffer.alloc(14);
  private headerLength = 0;
  /** Payload bytes of the current frame still to come. */
  private remaining = 0;
  private sawClose = false;

  /** Between two frames: a close frame may be written to the client here without splitting one. */
  get atBoundary(): boolean {
    return this.phase === 'frames' && this.headerLength === 0 && this.remaining === 0;
  }

  /** Realtime sent a close frame: the closing handshake is its own, no other close may follow it. */
  get closeSent(): boolean {
    return this.sawClose;
  }

  /**
   * Reads `chunk` and returns how many of its bytes belong to the stream up to where it may be cut:
   * all of them, or with `toBoundary` only those up to the first frame boundary (the end of the
   * frame in progress, or 0 when already at one).
   */
  feed(chunk: Buffer, toBoundary: boolean): number {
    let i = 0;
    if (this.phase === 'head') {
      i = this.readHead(chunk);
      if (this.phase === 'head') return chunk.length;
    }
    if (this.phase === 'http') return chunk.length;
    while (i < chunk.length) {
      if (toBoundary && this.atBoundary) return i;
      if (this.remaining > 0) {
        const n = Math.min(this.remaining, chunk.length - i);
        this.remaining -= n;
        i += n;
        continue;
      }
      this.header[this.headerLength++] = chunk[i++];
      this.headerDone();
    }
    return i;
  }

  /** Consumes the answer head from the start of `chunk`; returns where the bytes after it start. */
  private readHead(chunk: Buffer): number {
    const before = this.head.length;
    this.head = Buffer.concat([this.head, chunk]);
    const end = this.head.indexOf(HEAD_END);
    if (end === -1) {
      if (this.head.length > MAX_HEAD_BYTES) this.phase = 'http';
      return chunk.length;
    }
    this.phase = /^HTTP\/1\.[01] 101 /.test(this.head.toString('latin1', 0, 13)) ? 'frames' : 'http';
    this.head = Buffer.alloc(0);
    return end + HEAD_END.length - before;
  }

  /** Once the header read so far is complete, takes the frame's payload length from it. */
  private headerDone(): void {
    if (this.headerLength < 2) return;
    const b1 = this.header[1];
    const len7 = b1 & 0x7f;
    const needed = 2 + (len7 === 126 ? 2 : len7 === 127 ? 8 : 0) + (b1 & 0x80 ? 4 : 0);
    if (this.headerLength < needed) return;
    if ((this.header[0] & 0x0f) === 0x8) this.sawClose = true;
    this.remaining =
      len7 === 126
        ? this.header.readUInt16BE(2)
        : len7 === 127
          ? this.header.readUInt32BE(2) * 2 ** 32 + this.header.readUInt32BE(6)
          : len7;
    this.headerLength = 0;
  }
}

/** An unmasked close frame (server to client) with `code` and `reason` (at most 123 bytes). */
export function closeFrame(code: number, reason: string): Buffer {
  const text = Buffer.from(reason, 'utf8');
  const frame = Buffer.alloc(4 + text.length);
  frame[0] = 0x88; // FIN, opcode close
  frame[1] = 2 + text.length;
  frame.writeUInt16BE(code, 2);
  text.copy(frame, 4);
  return frame;
}

/**
 * The bytes of one WebSocket forwarded to realtime, piped both ways once realtime accepted the
 * upstream connection. Server→client chunks are passed on as they arrive, with the frame boundaries
 * tracked on the side, so that a draining api can end the client's connection the way realtime's
 * own drain does: with a close frame 1012 "service restart" (reconnect at once), written between
 * two frames. Cutting the socket instead reads as 1006, which docs/websocket.md gives for a missed
 * heartbeat.
 */
export class WsTunnel {
  private readonly frames = new ServerFrames();
  private restarting = false;
  /** Nothing more is read from realtime or passed on to the client. */
  private ended = false;

  constructor(
    private readonly client: Duplex,
    private readonly upstream: net.Socket,
  ) {
    client.pipe(upstream);
    upstream.on('data', (chunk: Buffer) => this.forward(chunk));
    client.on('drain', () => upstream.resume());
    upstream.on('close', () => {
      if (this.ended) return;
      this.ended = true;
      // Realtime is done with the connection (after a close frame, e.g. 1009 for an oversize frame,
      // or a failure) while the client may still be sending: its side is ended gently, not left
      // waiting on a pipe that will never drain.
      client.unpipe(upstream);
      closeLingering(client);
    });
  }

  /**
   * Ends the client's connection with 1012 "service restart" at the next frame boundary: at once
   * when realtime is between frames, else once the frame it is sending has passed (the drain's
   * deadline bounds the wait). The connection to realtime is closed then, and nothing it sends after
   * is read. When realtime already sent a close frame, its closing handshake goes on untouched.
   */
  restart(): void {
    if (this.restarting || this.ended) return;
    this.restarting = true;
    if (this.frames.atBoundary && !this.frames.closeSent) this.sendRestart();
  }

  private forward(chunk: Buffer): void {
    if (this.ended) return;
    const n = this.frames.feed(chunk, this.restarting);
    if (n > 0 && !this.client.write(n === chunk.length ? chunk : chunk.subarray(0, n))) this.upstream.pause();
    if (this.restarting && this.frames.atBoundary && !this.frames.closeSent) this.sendRestart();
  }

  private sendRestart(): void {
    this.ended = true;
    this.client.unpipe(this.upstream);
    this.upstream.destroy();
    closeLingering(this.client, closeFrame(SERVICE_RESTART_CLOSE.code, SERVICE_RESTART_CLOSE.reason));
  }
}
