import { ChildProcess, spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import readline from 'node:readline';
import type { Stack } from './stack';
import { eventually, orAfter } from './wait';

const BOT = path.resolve(__dirname, '../../scripts/chatBot.js');

/** The reference chat bot (scripts/chatBot.ts) running as a child process against a stack. */
export interface ChatBotProcess {
  child: ChildProcess;
  /** Every JSON line it printed so far. */
  events: Array<Record<string, any>>;
  /** The first printed line (already printed or to come) matching `pred`. */
  waitFor(pred: (e: Record<string, any>) => boolean, timeoutMs?: number): Promise<Record<string, any>>;
  stop(): Promise<void>;
}

/** Writes a fixture to a temporary file. */
export function writeFixture(fixture: unknown): string {
  const file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'chatbot-')), 'fixture.json');
  fs.writeFileSync(file, JSON.stringify(fixture));
  return file;
}

/** Realtime instances of the stack that report a chat bot in the stats hash the api reads. */
async function reportedBots(s: Stack): Promise<number> {
  const all = await s.redis.hgetall(`${s.config.redisPrefix}ws:stats`);
  return Object.values(all).reduce((n, v) => n + (JSON.parse(v).chatBots ?? 0), 0);
}

/**
 * Spawns `node dist/scripts/chatBot.js --url ws://<api>/v1/ws --key <key> --fixture <file>` (the
 * api forwards /v1/ws to realtime) and resolves once the api can see it (the stats hash reports it).
 */
export async function startChatBot(
  s: Stack,
  fixture: unknown,
  opts: { key?: string; silent?: boolean } = {},
): Promise<ChatBotProcess> {
  const before = await reportedBots(s);
  const url = `${s.url.replace(/^http/, 'ws')}/v1/ws`;
  const fixtureFile = writeFixture(fixture);
  const args = [BOT, '--url', url, '--key', opts.key ?? s.systemKey, '--fixture', fixtureFile];
  if (opts.silent) args.push('--silent');
  const child = spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  const events: Array<Record<string, any>> = [];
  let stderr = '';
  child.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
  readline.createInterface({ input: child.stdout! }).on('line', (line) => {
    try {
      events.push(JSON.parse(line));
    } catch {
      events.push({ event: 'text', line });
    }
  });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const bot: ChatBotProcess = {
    child,
    events,
    waitFor: (pred, timeoutMs = 10_000) =>
      eventually(() => events.find(pred), timeoutMs).catch(() => {
        throw new Error(`chat bot: no matching line; printed ${JSON.stringify(events)}; stderr ${stderr}`);
      }),
    async stop() {
      if (child.exitCode === null && child.signalCode === null) {
        child.kill('SIGTERM');
        await orAfter(exited, 3000, undefined);
        if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
      }
      await eventually(async () => (await reportedBots(s)) <= before, 5000).catch(() => undefined);
      // The fixture's temporary directory goes with the bot (runs left one per bot in /tmp).
      fs.rmSync(path.dirname(fixtureFile), { recursive: true, force: true });
    },
  };
  await bot.waitFor((e) => e.event === 'connected' || e.event === 'refused', 20_000);
  await eventually(async () => (await reportedBots(s)) > before, 5000);
  return bot;
}
