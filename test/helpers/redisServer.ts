import { ChildProcess, spawn } from 'node:child_process';
import net from 'node:net';
import Redis from 'ioredis';

/** A redis-server of one test file's own, on a free port, that the test can stop and restart. */
export interface PrivateRedis {
  port: number;
  url: string;
  /** Stops the server (SIGTERM; nothing is saved) and waits for it to exit. */
  stop(): Promise<void>;
  /** Starts it again on the same port, empty, and waits until it answers PING. */
  start(): Promise<void>;
  /**
   * Freezes the server (SIGSTOP): its connections stay open and nothing is answered, as with a
   * hung Redis or a network that drops packets. `thaw()` (SIGCONT) lets it answer again.
   */
  freeze(): void;
  thaw(): void;
}

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address() as net.AddressInfo;
      srv.close(() => resolve(port));
    });
    srv.on('error', reject);
  });
}

/** Polls PING until the server answers (it may take a moment on a busy machine). */
async function answering(url: string, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const probe = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
    probe.on('error', () => undefined);
    try {
      await probe.connect();
      if ((await probe.ping()) === 'PONG') return;
    } catch {
      if (Date.now() > deadline) throw new Error(`redis-server at ${url} did not answer in time`);
      await new Promise((r) => setTimeout(r, 50));
    } finally {
      probe.disconnect();
    }
  }
}

/**
 * Spawns `redis-server --port <free> --save '' --appendonly no`: no persistence, so a restart is
 * an empty Redis, like a cache that lost everything. Call `stop()` in an `after.always` hook.
 */
export async function startPrivateRedis(): Promise<PrivateRedis> {
  const port = await freePort();
  const url = `redis://127.0.0.1:${port}`;
  let child: ChildProcess | undefined;
  const server: PrivateRedis = {
    port,
    url,
    async start() {
      if (child) return;
      const c = spawn(
        'redis-server',
        ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'],
        { stdio: 'ignore' },
      );
      child = c;
      c.once('exit', () => {
        if (child === c) child = undefined;
      });
      await answering(url);
    },
    freeze() {
      child?.kill('SIGSTOP');
    },
    thaw() {
      child?.kill('SIGCONT');
    },
    async stop() {
      const c = child;
      if (!c) return;
      const exited = new Promise<void>((resolve) => c.once('exit', () => resolve()));
      c.kill('SIGCONT'); // a frozen server takes SIGTERM only once it runs
      c.kill('SIGTERM');
      await exited;
      child = undefined;
    },
  };
  await server.start();
  return server;
}
