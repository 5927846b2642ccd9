import { ChildProcess, execFile, spawn } from 'node:child_process';
import net from 'node:net';
import path from 'node:path';
import readline from 'node:readline';

export type LogLine = Record<string, any> & { msg?: string };

/** One entry point (dist/api/server.js, …) running as a child process, the way PM2 runs it. */
export interface ServiceProcess {
  child: ChildProcess;
  /** Every JSON log line written so far (pino, LOG_LEVEL info). */
  logs: LogLine[];
  /** Resolves with the first log line (already written or to come) whose `msg` is `msg`. */
  waitForLog(msg: string, timeoutMs?: number): Promise<LogLine>;
  /** Resolves when the process has exited; `at` is Date.now() of the exit. */
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null; at: number }>;
  /** Everything written to stderr so far (a structured logger writes nothing there). */
  stderr(): string;
  /** Cleanup: SIGKILL if still running. */
  kill(): Promise<void>;
}

const ENTRIES = {
  api: path.resolve(__dirname, '../../api/server.js'),
  realtime: path.resolve(__dirname, '../../realtime/server.js'),
  workers: path.resolve(__dirname, '../../workers/index.js'),
};

/**
 * Starts `entry` with `env` (on top of this process's environment) and resolves once it logged
 * `readyMsg`. Start-up on a busy machine can take several seconds (GraphQL schema, Redis, Postgres).
 */
export async function spawnService(
  entry: keyof typeof ENTRIES,
  env: Record<string, string>,
  readyMsg: string,
  timeoutMs = 60_000,
): Promise<ServiceProcess> {
  const child = spawn(process.execPath, [ENTRIES[entry]], {
    env: { ...process.env, ...env, LOG_LEVEL: 'info' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const logs: LogLine[] = [];
  const waiters: Array<() => void> = [];
  let stderr = '';
  child.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
  readline.createInterface({ input: child.stdout! }).on('line', (line) => {
    try {
      logs.push(JSON.parse(line));
    } catch {
      logs.push({ msg: line });
    }
    waiters.splice(0).forEach((w) => w());
  });
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null; at: number }>((resolve) =>
    child.once('exit', (code, signal) => {
      resolve({ code, signal, at: Date.now() });
      waiters.splice(0).forEach((w) => w());
    }),
  );
  async function waitForLog(msg: string, ms = 10_000): Promise<LogLine> {
    const deadline = Date.now() + ms;
    for (;;) {
      const found = logs.find((l) => l.msg === msg);
      if (found) return found;
      const left = deadline - Date.now();
      if (left <= 0 || child.exitCode !== null || child.signalCode !== null) {
        throw new Error(
          `${entry}: no "${msg}" log line; exit ${child.exitCode ?? child.signalCode}; stderr: ${stderr.slice(-2000)}`,
        );
      }
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, left);
        waiters.push(() => {
          clearTimeout(timer);
          resolve();
        });
      });
    }
  }
  const service: ServiceProcess = {
    child,
    logs,
    waitForLog,
    exited,
    stderr: () => stderr,
    async kill() {
      if (child.exitCode === null && child.signalCode === null) {
        child.kill('SIGKILL');
        await exited;
      }
    },
  };
  try {
    await waitForLog(readyMsg, timeoutMs);
  } catch (err) {
    await service.kill();
    throw err;
  }
  return service;
}

/** A port nothing listens on right now: for REALTIME_PORT, where 0 means PORT + 1 rather than "any". */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = net.createServer().listen(0, '127.0.0.1', () => {
      const { port } = probe.address() as net.AddressInfo;
      probe.close(() => resolve(port));
    });
    probe.on('error', reject);
  });
}

/** Whether a process (or, for a negative pid, any process of that group) is alive. */
export function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** What a command printed and how it ended (spawnSync's fields). */
export interface RunResult {
  status: number | null;
  stdout: string;
  stderr: string;
}

/**
 * Runs a command to its end without blocking this process, as spawnSync would report it (a kill
 * by the timeout is status null). Never spawnSync in a test file: its tests run concurrently in
 * one event loop, and a loop held for a command's whole run wakes with its timers first, so a
 * query or connection still waiting for its answer times out ('Query read timeout', 'timeout
 * expired') although the answer arrived.
 */
export function runToEnd(
  file: string,
  args: string[],
  opts: { env?: NodeJS.ProcessEnv; cwd?: string; timeout?: number } = {},
): Promise<RunResult> {
  return new Promise((resolve) => {
    execFile(
      file,
      args,
      { env: opts.env, cwd: opts.cwd, timeout: opts.timeout ?? 30_000, encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 },
      (err, stdout, stderr) => {
        const code = (err as { code?: unknown } | null)?.code;
        resolve({ status: err ? (typeof code === 'number' ? code : null) : 0, stdout, stderr });
      },
    );
  });
}
