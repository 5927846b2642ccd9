import { EventEmitter } from 'node:events';
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Browser, Page } from 'puppeteer-core';
import type { Logger } from '../../shared/logger';

export interface PdfRendererOptions {
  /** Debian's chromium (CHROMIUM_PATH). */
  executablePath: string;
  /** Pages rendered at once (EXPORT_PDF_MAX_PAGES); further renders wait for a free one. */
  maxPages: number;
  logger: Logger;
  /** Longest a single page may take to load and print. */
  pageTimeoutMs?: number;
}

/** Chromium profile directories: `<tmp>/<PROFILE_PREFIX><worker pid>-<random>`. */
export const PROFILE_PREFIX = 'service-chromium-';

const removeDir = (dir: string) => rmSync(dir, { recursive: true, force: true, maxRetries: 3 });

/**
 * Removes a browser's profile once it has exited, never throwing (it runs in event handlers, where
 * a throw ends the worker): Chromium's helper processes can write to it a moment longer (ENOTEMPTY),
 * so a failed attempt is tried again a few times; a directory still left is an orphan that the next
 * worker start removes.
 */
function removeProfile(dir: string, attempt = 0): void {
  try {
    removeDir(dir);
  } catch {
    if (attempt < 5) setTimeout(() => removeProfile(dir, attempt + 1), 500 * (attempt + 1)).unref();
  }
}

/**
 * Removes the profile directories of worker processes that no longer run (killed outright: their
 * own clean-up never ran). A pid reused by another process keeps its directory until it ends too.
 */
function removeOrphanProfiles(own: boolean): void {
  let names: string[];
  try {
    names = readdirSync(os.tmpdir());
  } catch {
    return;
  }
  for (const name of names) {
    const m = new RegExp(`^${PROFILE_PREFIX}(\\d+)-`).exec(name);
    // Our own pid's are left by an earlier process that had it (a container's worker is often pid 1
    // every time): this runs before this process starts any browser.
    if (!m || (Number(m[1]) === process.pid ? !own : pidRuns(Number(m[1])))) continue;
    try {
      removeDir(path.join(os.tmpdir(), name));
    } catch {
      // Another worker removing it at the same moment, or not ours to remove.
    }
  }
}

/** Whether this process removed its own pid's leftovers yet (once, before its first browser). */
let ownOrphansRemoved = false;

function pidRuns(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/**
 * Prints HTML to PDF with one Chromium per worker process, started on first use and reused by
 * every job. When the browser dies (crash, OOM kill) the renders using it fail, their jobs are
 * retried by BullMQ, and the next render starts a fresh browser. Pages are reused across renders.
 * Emits `render` and `rendered` with the page around each render, and `launch` with each browser
 * it starts (for tests and logs).
 */
export class PdfRenderer extends EventEmitter {
  private browser?: Promise<Browser>;
  /** Open pages of the running browser waiting for the next render (never more than maxPages). */
  private readonly idle: Page[] = [];
  private active = 0;
  private readonly waiting: Array<() => void> = [];
  private closed = false;
  /** Browsers started so far. */
  launches = 0;

  constructor(private readonly opts: PdfRendererOptions) {
    super();
  }

  /** The running browser's process id, if one runs. */
  async browserPid(): Promise<number | undefined> {
    const b = await this.browser?.catch(() => undefined);
    return b?.connected ? b.process()?.pid : undefined;
  }

  private launch(): Promise<Browser> {
    const started = Date.now();
    // A profile directory of our own, removed when the browser ends or fails to start (puppeteer's
    // own is left behind by a failed launch: one directory per attempt of every export).
    if (this.launches === 0) {
      removeOrphanProfiles(!ownOrphansRemoved);
      ownOrphansRemoved = true;
    }
    const profile = mkdtempSync(path.join(os.tmpdir(), `${PROFILE_PREFIX}${process.pid}-`));
    // puppeteer-core is loaded with the first browser: most worker processes never render a PDF,
    // and loading it costs every one of them ~0.3 s of CPU at start.
    const p = import('puppeteer-core')
      .then(({ default: puppeteer }) =>
        puppeteer.launch({
          executablePath: this.opts.executablePath,
          userDataDir: profile,
          headless: true,
          // Commands over a pipe instead of a WebSocket: a worker killed outright (SIGKILL, OOM) closes
          // the pipe, and Chromium exits with it. Over a socket it kept running, ~470 MB each time.
          pipe: true,
          // As root (containers, CI) Chromium needs --no-sandbox; the pages only ever hold our own escaped HTML.
          args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage', '--no-first-run', '--disable-extensions'],
          handleSIGINT: false,
          handleSIGTERM: false,
          handleSIGHUP: false,
        }),
      )
      .then(
        (b) => {
          this.launches++;
          this.opts.logger.info({ pid: b.process()?.pid, ms: Date.now() - started }, 'chromium started');
          b.on('disconnected', () => {
            // Once Chromium has exited: it writes to its profile until then.
            const proc = b.process();
            if (proc && proc.exitCode === null && proc.signalCode === null)
              proc.once('exit', () => removeProfile(profile));
            else removeProfile(profile);
            if (this.browser === p) this.browser = undefined;
            this.idle.splice(0);
            if (!this.closed)
              this.opts.logger.warn({ pid: b.process()?.pid }, 'chromium exited; next render starts it again');
          });
          this.emit('launch', b);
          return b;
        },
        (err) => {
          removeProfile(profile);
          if (this.browser === p) this.browser = undefined;
          throw err;
        },
      );
    this.browser = p;
    return p;
  }

  private async getBrowser(): Promise<Browser> {
    if (this.closed) throw new Error('pdf renderer closed');
    const p = this.browser;
    if (p) {
      const b = await p.catch(() => undefined);
      if (b?.connected) return b;
      // Dead (or failed to start): start another, unless a concurrent render already did.
      if (this.browser === p) this.browser = undefined;
    }
    return this.browser ?? this.launch();
  }

  private async acquire(): Promise<void> {
    if (this.active < this.opts.maxPages) {
      this.active++;
      return;
    }
    await new Promise<void>((resolve) => this.waiting.push(resolve));
  }

  private release(): void {
    const next = this.waiting.shift();
    if (next) next();
    else this.active--;
  }

  /** An idle page of the running browser, or a new one (a page costs a renderer process to open). */
  private async takePage(browser: Browser): Promise<Page> {
    while (this.idle.length) {
      const page = this.idle.pop()!;
      if (!page.isClosed() && page.browser() === browser) return page;
    }
    const page = await browser.newPage();
    page.setDefaultTimeout(this.opts.pageTimeoutMs ?? 30_000);
    await page.setJavaScriptEnabled(false);
    return page;
  }

  /** Prints `html` (a complete, self-contained document) to an A4 PDF. */
  async render(html: string): Promise<Buffer> {
    await this.acquire();
    let page: Page | undefined;
    let reusable = false;
    try {
      const browser = await this.getBrowser();
      page = await this.takePage(browser);
      this.emit('render', page);
      await page.setContent(html, { waitUntil: 'load' });
      const pdf = await page.pdf({
        format: 'A4',
        printBackground: true,
        margin: { top: '15mm', bottom: '15mm', left: '12mm', right: '12mm' },
      });
      reusable = true;
      return Buffer.from(pdf);
    } finally {
      if (page) this.emit('rendered', page);
      // Pages are kept for the next render (at most maxPages of them); one that failed is closed.
      if (page && reusable && !this.closed) this.idle.push(page);
      else await page?.close().catch(() => undefined);
      this.release();
    }
  }

  /** Closes the browser (worker shutdown). */
  async close(): Promise<void> {
    this.closed = true;
    this.idle.splice(0);
    const b = await this.browser?.catch(() => undefined);
    this.browser = undefined;
    await b?.close().catch(() => undefined);
  }
}

let shared: PdfRenderer | undefined;

/** The worker process's renderer (one browser per process), created on first use. */
export function sharedPdfRenderer(opts: PdfRendererOptions): PdfRenderer {
  if (!shared) shared = new PdfRenderer(opts);
  return shared;
}

/** The process's renderer if one was created (tests use it to find the browser). */
export function currentPdfRenderer(): PdfRenderer | undefined {
  return shared;
}

/** Closes the process's renderer (workers' shutdown); the next use creates a new one. */
export async function closeSharedPdfRenderer(): Promise<void> {
  const r = shared;
  shared = undefined;
  await r?.close();
}
