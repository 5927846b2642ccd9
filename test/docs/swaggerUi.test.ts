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
    // What the Content-Security-Policy refused (Chromium reports it on the console).
    const refused: string[] = [];
    page.on('console', (m) => {
      if (/Content Security Policy/i.test(m.text())) refused.push(m.text());
    });
    const res = await page.goto(`${s.url}/v1/swagger-ui/`, { waitUntil: 'networkidle0' });
    t.is(res?.status(), 200);
    // Never framed by another site; scripts only its own bundle and start-up script.
    t.is(res?.headers()['x-frame-options'], 'DENY');
    t.regex(res?.headers()['content-security-policy'] ?? '', /frame-ancestors 'none'/);
    t.regex(res?.headers()['content-security-policy'] ?? '', /script-src 'self' 'sha256-/);
    await page.waitForSelector('.opblock', { timeout: 30_000 });
    // Swagger UI virtualises long lists (100 or more entries): only the operations near the
    // viewport are in the DOM. Scroll through the whole page and collect every block drawn.
    const drawn = new Set<string>();
    const collect = async () => {
      const seen = (await page.$$eval('.opblock', (els) =>
        els.map(
          (el) =>
            `${el.querySelector('.opblock-summary-method')?.textContent?.toLowerCase()} ${el
              .querySelector('.opblock-summary-path')
              ?.getAttribute('data-path')}`,
        ),
      )) as string[];
      for (const x of seen) drawn.add(x);
    };
    for (let guard = 0; guard < 2000; guard++) {
      await collect();
      const atEnd = (await page.evaluate(
        'window.scrollY + window.innerHeight >= document.documentElement.scrollHeight - 2',
      )) as boolean;
      if (atEnd) break;
      await page.evaluate('window.scrollBy(0, Math.floor(window.innerHeight / 2))');
      await new Promise((r) => setTimeout(r, 30));
    }
    for (const [path, ops] of Object.entries(doc.paths))
      for (const method of Object.keys(ops)) t.true(drawn.has(`${method} ${path}`), `drawn: ${method} ${path}`);
    t.is(drawn.size, operations, 'every documented operation is drawn, and nothing else');
    // Swagger UI's own state lists the same operations.
    const listed = (await page.evaluate(
      `JSON.stringify(window.ui.specSelectors.operations().toJS().map((o) => o.method + ' ' + o.path))`,
    )) as string;
    t.is(new Set(JSON.parse(listed) as string[]).size, operations, 'Swagger UI lists every documented operation');
    const tags = (await page.evaluate('window.ui.specSelectors.taggedOperations().size')) as number;
    t.true(tags > 20, `${tags} tags`);
    t.regex(await page.title(), /Service API/);
    t.true(local.includes('/v1/openapi.json'));
    t.true(local.includes('/v1/swagger-ui/swagger-ui-bundle.js'));
    t.deepEqual(outside, [], 'requests that would have left the machine');
    t.deepEqual(errors, []);
    t.deepEqual(refused, [], 'nothing the page needs is refused by its policy');
  } finally {
    await browser.close();
  }
});
