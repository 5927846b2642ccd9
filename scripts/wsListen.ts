import { parseArgs } from 'node:util';
import { WebSocket } from 'ws';

const USAGE = `usage: node dist/scripts/wsListen.js [channel…] [--count N] [--timeout S] [--url ws://host:port/v1/ws]
  Connects to /v1/ws, subscribes to the channels (JSON protocol, docs/websocket.md) and prints every
  message as one JSON line. Authenticates with "Authorization: Bearer $TOKEN" when TOKEN is set
  (session token or API key), else connects anonymously. The user channel user:<id> of a signed-in
  user is subscribed without asking.
  --count N     exit after N messages (subscription confirmations not counted)
  --timeout S   give up (exit 1) after S seconds
  --url         default ws://localhost:$PORT/v1/ws (PORT defaults to 3000)`;

const err = (msg: string) => process.stderr.write(`${msg}\n`);

/**
 * A small WebSocket client for trying the realtime API from a shell: the last step of the README's
 * first steps. Exits 0 after --count messages, 1 on a refused connection, a refused subscription,
 * a timeout or a close by the server.
 */
function main(): void {
  const { values, positionals } = parseArgs({
    allowPositionals: true,
    options: {
      count: { type: 'string' },
      timeout: { type: 'string' },
      url: { type: 'string' },
      help: { type: 'boolean', default: false },
    },
  });
  if (values.help) {
    err(USAGE);
    return;
  }
  const count = values.count === undefined ? Infinity : Number(values.count);
  const timeout = values.timeout === undefined ? 0 : Number(values.timeout);
  if (!(count > 0) || !(timeout >= 0)) {
    err(USAGE);
    process.exit(2);
  }
  const url = values.url ?? `ws://localhost:${process.env.PORT || 3000}/v1/ws`;
  const token = process.env.TOKEN;
  const ws = new WebSocket(url, { headers: token ? { authorization: `Bearer ${token}` } : {} });
  const pending = new Set(positionals);
  let received = 0;
  /** Set once we decided to stop: the close that follows is ours, not the server's. */
  let exitCode: number | undefined;
  const finish = (code: number) => {
    if (exitCode !== undefined) return;
    exitCode = code;
    ws.close(1000);
    // Exit after the close handshake, or anyway if the server does not answer it.
    setTimeout(() => process.exit(code), 500).unref();
  };
  if (timeout > 0) {
    setTimeout(() => {
      err(`timed out after ${timeout} s (${received} message${received === 1 ? '' : 's'} received)`);
      finish(1);
    }, timeout * 1000).unref();
  }

  ws.on('unexpected-response', (_req, res) => {
    let body = '';
    res.on('data', (c: Buffer) => (body += c));
    res.on('end', () => {
      err(`connection refused: HTTP ${res.statusCode} ${body}`);
      process.exit(1);
    });
  });
  ws.on('error', (e) => {
    err(`connection failed: ${e.message}`);
    process.exit(1);
  });
  ws.on('open', () => {
    process.stdout.write(`connected to ${url} ${token ? 'with a Bearer token' : 'anonymously'}\n`);
    for (const channel of positionals) ws.send(JSON.stringify({ type: 'subscribe', channel }));
  });
  ws.on('message', (data: Buffer, isBinary: boolean) => {
    if (isBinary) {
      process.stdout.write(`(binary frame, ${data.length} bytes)\n`);
      return;
    }
    const text = data.toString('utf8');
    const msg = JSON.parse(text) as { type?: string; channel?: string; data?: unknown; message?: string };
    if (
      msg.type === 'message' &&
      typeof msg.channel === 'string' &&
      pending.has(msg.channel) &&
      msg.data === `Subscribed to ${msg.channel}`
    ) {
      pending.delete(msg.channel);
      process.stdout.write(`subscribed to ${msg.channel}\n`);
      return;
    }
    if (msg.type === 'error' && pending.size > 0) {
      // A refused subscription is answered with an error before anything else arrives for it.
      err(`refused: ${msg.message}`);
      finish(1);
      return;
    }
    process.stdout.write(`${text}\n`);
    if (++received >= count) finish(0);
  });
  ws.on('close', (code, reason) => {
    if (exitCode !== undefined) process.exit(exitCode);
    err(`closed by the server: ${code} ${reason.toString()}`.trim());
    process.exit(1);
  });
}

main();
