import test from 'ava';
import { closeFrame, ServerFrames } from '../../api/wsTunnel';

/** An unmasked server frame (FIN set) with the shortest length encoding, as realtime's ws writes it. */
function frame(opcode: number, payload: Buffer): Buffer {
  const n = payload.length;
  const head = n < 126 ? Buffer.alloc(2) : n < 65536 ? Buffer.alloc(4) : Buffer.alloc(10);
  head[0] = 0x80 | opcode;
  if (n < 126) head[1] = n;
  else if (n < 65536) {
    head[1] = 126;
    head.writeUInt16BE(n, 2);
  } else {
    head[1] = 127;
    head.writeBigUInt64BE(BigInt(n), 2);
  }
  return Buffer.concat([head, payload]);
}

const HEAD = Buffer.from('HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n');
// 7-bit, 16-bit and 64-bit lengths, an empty control frame, and a message in two fragments.
const FRAMES = [
  frame(0x1, Buffer.from('{"type":"pong"}')),
  frame(0x2, Buffer.alloc(300, 7)),
  frame(0x1, Buffer.alloc(70_000, 0x61)),
  frame(0x9, Buffer.alloc(0)),
  Buffer.concat([Buffer.from([0x01, 3]), Buffer.from('abc')]),
  frame(0x0, Buffer.from('def')),
];
const STREAM = Buffer.concat([HEAD, ...FRAMES]);
/** Offsets in STREAM where a close frame may go: after the head and after every frame. */
const BOUNDARIES = FRAMES.reduce((b, f) => [...b, b[b.length - 1] + f.length], [HEAD.length]);

/**
 * Feeds STREAM in `size` chunks up to `from` as a tunnel does, then from there on "to the boundary";
 * returns where the forwarded bytes end (the tunnel writes that far, then its close frame).
 */
function cutAfter(from: number, size: number): number {
  const frames = new ServerFrames();
  let at = 0;
  while (at < from) {
    const chunk = STREAM.subarray(at, Math.min(from, at + size));
    if (frames.feed(chunk, false) !== chunk.length) throw new Error('stopped without being asked');
    at += chunk.length;
  }
  while (at < STREAM.length) {
    const chunk = STREAM.subarray(at, at + size);
    const n = frames.feed(chunk, true);
    at += n;
    if (n < chunk.length) break;
  }
  if (!frames.atBoundary) throw new Error(`not at a boundary at ${at}`);
  return at;
}

test('the tracker cuts only at frame boundaries, whatever the chunking (1, 7 and 4096 bytes)', (t) => {
  const froms = [
    ...Array.from({ length: BOUNDARIES[2] + 40 }, (_, i) => i),
    BOUNDARIES[2] + 9,
    BOUNDARIES[2] + 10,
    BOUNDARIES[2] + 35_000,
    BOUNDARIES[3] - 1,
    ...Array.from({ length: STREAM.length - BOUNDARIES[3] + 1 }, (_, i) => BOUNDARIES[3] + i),
  ];
  for (const size of [1, 7, 4096]) {
    for (const from of froms) {
      const expected = BOUNDARIES.find((b) => b >= from) ?? -1;
      t.is(cutAfter(from, size), expected, `restart at ${from}, chunks of ${size}`);
    }
  }
});

test('the tracker knows when realtime sent a close frame; a refused upgrade (not 101) is never cut', (t) => {
  const closing = new ServerFrames();
  closing.feed(Buffer.concat([HEAD, FRAMES[0]]), false);
  t.false(closing.closeSent);
  closing.feed(closeFrame(1009, 'message too big'), false);
  t.true(closing.closeSent);

  const refused = new ServerFrames();
  const answer = Buffer.from(
    'HTTP/1.1 401 Unauthorized\r\nContent-Type: application/json\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}',
  );
  t.is(refused.feed(answer, true), answer.length);
  t.false(refused.atBoundary);
});

test('closeFrame: FIN + close opcode, 2-byte code, the reason', (t) => {
  t.deepEqual(closeFrame(1012, 'service restart'), Buffer.from('881103f4736572766963652072657374617274', 'hex'));
});
