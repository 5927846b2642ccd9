/**
 * The baseline of bench/wsFanout.ts: a bare `ws` server that psubscribes to the same Redis channel
 * and broadcasts every message to every connected client as a text frame (one shared Buffer, like
 * the realtime process). No authentication, channels, heartbeat or limits. Run as a child process
 * with an IPC channel: reports `ready` with its port and answers `memory` probes (after a GC when
 * started with --expose-gc).
 * Usage: node --expose-gc dist/bench/wsBare.js <redisUrl> <redisChannel>
 */
import http from 'node:http';
import type net from 'node:net';
import Redis from 'ioredis';
import { WebSocket, WebSocketServer } from 'ws';

const [redisUrl, channel] = process.argv.slice(2);
const clients = new Set<WebSocket>();
const server = http.createServer();
const wss = new WebSocketServer({ server, clientTracking: false, perMessageDeflate: false });
wss.on('connection', (ws) => {
  clients.add(ws);
  ws.on('close', () => clients.delete(ws));
  ws.on('error', () => ws.terminate());
});
const sub = new Redis(redisUrl);
sub.on('messageBuffer', (_ch: Buffer, payload: Buffer) => {
  for (const ws of clients) if (ws.readyState === WebSocket.OPEN) ws.send(payload, { binary: false });
});
void sub
  .subscribe(channel)
  .then(() =>
    server.listen(0, '127.0.0.1', () =>
      process.send!({ cmd: 'ready', port: (server.address() as net.AddressInfo).port }),
    ),
  );
process.on('message', (msg: { cmd?: string }) => {
  if (msg?.cmd !== 'memory') return;
  (globalThis as { gc?: () => void }).gc?.();
  process.send!({ cmd: 'memory', memory: process.memoryUsage(), stats: { connections: clients.size } });
});
process.on('SIGTERM', () => process.exit(0));
