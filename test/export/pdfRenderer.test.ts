import test from 'ava';
import { spawn } from 'node:child_process';
import path from 'node:path';
import { processAlive } from '../helpers/processes';
import { eventually } from '../helpers/wait';
import { createLogger } from '../../shared/logger';
import { PdfRenderer } from '../../workers/export/pdfRenderer';
import { pdfText } from './archive';

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
    child.kill('SIGKILL');
    await eventually(() => !processAlive(pid), 10_000);
    t.false(processAlive(pid));
  } finally {
    child.kill('SIGKILL');
    if (pid && processAlive(pid)) process.kill(pid, 'SIGKILL');
  }
});
