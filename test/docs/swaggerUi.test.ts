import test from 'ava';
import puppeteer from 'puppeteer-core';
import { useStack } from '../helpers/stack';

const stack = useStack(test);

test('Swagger UI renders every operation in Chromium with no request leaving the machine', async (t) => {
  const s = stack();
  const doc = (await s.request('GET', '/v1/openapi.json')).body as { paths: Record<string, Record<string, unknown>> };
  const operations = Object.values(doc.paths).reduce((n, ops) => n + Object.keys(ops).length, 0);
  const browser = await puppeteer.launch({
    executablePath: process.env.CHROMIUM_PATH || '/usr/bin/chromium',
    headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage', '--no-first-run', '--disable-extensions'],
  });
  try {
    const page = await browser.newPage();
    const local: string[] = [];
    const outside: string[] = [];
    await page.setRequestInterception(true);
    page.on('request', (req) => {
      const url = new URL(req.url());
      // Only the api under test may be reached (data: URLs of the bundle's inline images stay in the page).
      if (url.protocol === 'data:' || url.origin === s.url) {
        if (url.origin === s.url) local.push(url.pathname);
        void req.continue();
      } else {
        outside.push(req.url());
        void req.abort();
      }
    });
    const errors: string[] = [];
    page.on('pageerror', (e) => errors.push(String(e)));
    const res = await page.goto(`${s.url}/v1/swagger-ui/`, { waitUntil: 'networkidle0' });
    t.is(res?.status(), 200);
    await page.waitForSelector('.opblock', { timeout: 30_000 });
    const blocks = await page.$$eval('.opblock', (els) => els.length);
    t.true(blocks > 0, 'operation blocks rendered');
    // The operations Swagger UI loaded from the document, as its own state lists them (headless
    // Chromium renders the first tags' blocks; the state holds every operation of every tag).
    const listed = (await page.evaluate(
      `JSON.stringify(window.ui.specSelectors.operations().toJS().map((o) => o.method + ' ' + o.path))`,
    )) as string;
    const shown = new Set(JSON.parse(listed) as string[]);
    t.is(shown.size, operations, 'Swagger UI lists every documented operation');
    for (const [path, ops] of Object.entries(doc.paths))
      for (const method of Object.keys(ops)) t.true(shown.has(`${method} ${path}`), `${method} ${path}`);
    const tags = (await page.evaluate('window.ui.specSelectors.taggedOperations().size')) as number;
    t.true(tags > 20, `${tags} tags`);
    t.regex(await page.title(), /Service API/);
    t.true(local.includes('/v1/openapi.json'));
    t.true(local.includes('/v1/swagger-ui/swagger-ui-bundle.js'));
    t.deepEqual(outside, [], 'requests that would have left the machine');
    t.deepEqual(errors, []);
  } finally {
    await browser.close();
  }
});
