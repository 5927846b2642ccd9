import test from 'ava';
import { spawn } from 'node:child_process';
import { readdirSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { processAlive } from '../helpers/processes';
import { eventually } from '../helpers/wait';
import { createLogger } from '../../shared/logger';
import { PdfRenderer, PROFILE_PREFIX } from '../../workers/export/pdfRenderer';
import { REPORT_FONTS } from '../../workers/export/documents';
import { pdfFonts, pdfText } from './archive';

const CHROMIUM = process.env.CHROMIUM_PATH || '/usr/bin/chromium';

/** The Chromium profile directories of worker process `pid`. */
const profilesOf = (pid: number) => readdirSync(os.tmpdir()).filter((n) => n.startsWith(`${PROFILE_PREFIX}${pid}-`));

test.serial('a browser that fails to start, or ends, leaves no profile directory behind', async (t) => {
  const broken = new PdfRenderer({ executablePath: '/bin/false', maxPages: 1, logger: createLogger('test', 'silent') });
  for (let i = 0; i < 3; i++) await t.throwsAsync(broken.render('<p>x</p>'));
  await broken.close();
  t.deepEqual(profilesOf(process.pid), []);
  const renderer = new PdfRenderer({ executablePath: CHROMIUM, maxPages: 1, logger: createLogger('test', 'silent') });
  await renderer.render('<p>x</p>');
  t.is(profilesOf(process.pid).length, 1, 'the running browser has its profile');
  await renderer.close();
  await eventually(() => profilesOf(process.pid).length === 0, 10_000);
  t.deepEqual(profilesOf(process.pid), []);
});

test('one browser and reused pages for every render, at most EXPORT_PDF_MAX_PAGES pages at once', async (t) => {
  const renderer = new PdfRenderer({
    executablePath: process.env.CHROMIUM_PATH || '/usr/bin/chromium',
    maxPages: 2,
    logger: createLogger('test', 'silent'),
  });
  let rendering = 0;
  let most = 0;
  const pages = new Set<unknown>();
  renderer.on('render', (page: unknown) => {
    pages.add(page);
    most = Math.max(most, ++rendering);
  });
  renderer.on('rendered', () => rendering--);
  try {
    const pdfs = await Promise.all(
      Array.from({ length: 5 }, (_, i) => renderer.render(`<!doctype html><p>render number ${i}</p>`)),
    );
    t.is(renderer.launches, 1);
    t.is(most, 2);
    // Pages are reused: five renders on two pages.
    t.is(pages.size, 2);
    for (const [i, pdf] of pdfs.entries()) t.true((await pdfText(pdf)).includes(`render number ${i}`));
  } finally {
    await renderer.close();
  }
});

test('a worker killed outright takes its Chromium with it', async (t) => {
  // A process that starts the renderer, renders once and prints Chromium's pid, then waits.
  const renderer = path.resolve(__dirname, '../../workers/export/pdfRenderer.js');
  const logger = path.resolve(__dirname, '../../shared/logger.js');
  const script = `
    const { PdfRenderer } = require(${JSON.stringify(renderer)});
    const { createLogger } = require(${JSON.stringify(logger)});
    const r = new PdfRenderer({ executablePath: ${JSON.stringify(process.env.CHROMIUM_PATH || '/usr/bin/chromium')}, maxPages: 1, logger: createLogger('test', 'silent') });
    r.on('launch', (b) => process.stdout.write('chromium ' + b.process().pid + '\\n'));
    r.render('<p>x</p>').then(() => setInterval(() => {}, 1000));`;
  const child = spawn(process.execPath, ['-e', script], { stdio: ['ignore', 'pipe', 'inherit'] });
  let out = '';
  child.stdout.on('data', (c: Buffer) => (out += c));
  let pid = 0;
  try {
    await eventually(() => /chromium (\d+)/.test(out), 30_000);
    pid = Number(/chromium (\d+)/.exec(out)![1]);
    t.true(processAlive(pid));
    const orphan = profilesOf(child.pid!);
    t.is(orphan.length, 1, 'the killed worker left its profile');
    child.kill('SIGKILL');
    await eventually(() => !processAlive(pid), 10_000);
    t.false(processAlive(pid));
    // The next browser a worker starts removes the profiles of workers that no longer run. (Not
    // asserted here that the profile is still there first: a test file running alongside may start
    // a browser of its own in between, and that one removes it.)
    const next = new PdfRenderer({ executablePath: CHROMIUM, maxPages: 1, logger: createLogger('test', 'silent') });
    try {
      await next.render('<p>y</p>');
      t.deepEqual(profilesOf(child.pid!), []);
    } finally {
      await next.close();
    }
  } finally {
    child.kill('SIGKILL');
    if (pid && processAlive(pid)) process.kill(pid, 'SIGKILL');
  }
});

test('a profile left by an earlier process with the same pid (a container worker is pid 1 each time) is removed', async (t) => {
  // The child plays the restarted worker: its pid's directory exists before its first browser.
  const renderer = path.resolve(__dirname, '../../workers/export/pdfRenderer.js');
  const logger = path.resolve(__dirname, '../../shared/logger.js');
  const script = `
    const fs = require('fs'), os = require('os'), path = require('path');
    const { PdfRenderer, PROFILE_PREFIX } = require(${JSON.stringify(renderer)});
    const { createLogger } = require(${JSON.stringify(logger)});
    const left = fs.mkdtempSync(path.join(os.tmpdir(), PROFILE_PREFIX + process.pid + '-'));
    const r = new PdfRenderer({ executablePath: ${JSON.stringify(CHROMIUM)}, maxPages: 1, logger: createLogger('test', 'silent') });
    r.render('<p>x</p>').then(async () => {
      process.stdout.write(fs.existsSync(left) ? 'kept' : 'removed');
      await r.close();
    });`;
  const child = spawn(process.execPath, ['-e', script], { stdio: ['ignore', 'pipe', 'inherit'] });
  let out = '';
  child.stdout.on('data', (c: Buffer) => (out += c));
  await new Promise((resolve) => child.on('exit', resolve));
  t.is(out, 'removed');
});

test('the report prints Chinese, Japanese, Korean and emoji with fonts that have them, not as boxes', async (t) => {
  const renderer = new PdfRenderer({ executablePath: CHROMIUM, maxPages: 1, logger: createLogger('test', 'silent') });
  try {
    const pdf = await renderer.render(
      `<!doctype html><html><head><meta charset="utf-8"><style>body { font-family: ${REPORT_FONTS}; }</style></head>` +
        '<body><p>Latin Ελληνικά Кириллица</p><p>漢字テスト 한국어 中文</p><p>😀 🇩🇪</p></body></html>',
    );
    // Chromium embeds DejaVu by name and the Noto fonts (CFF collections, colour bitmaps) as
    // unnamed Type 3 fonts; without them every CJK character and emoji is DejaVu's empty box.
    const fonts = (await pdfFonts(pdf)).split('\n').slice(2).filter(Boolean);
    t.true(fonts.some((f) => f.includes('DejaVuSans')));
    t.true(
      fonts.some((f) => !f.includes('DejaVuSans')),
      `only DejaVu embedded: CJK and emoji printed as boxes (install fonts-noto-cjk, fonts-noto-color-emoji)\n${fonts.join('\n')}`,
    );
    t.regex(await pdfText(pdf), /漢字テスト 한국어 中文/);
  } finally {
    await renderer.close();
  }
});
