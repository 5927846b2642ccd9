import test from 'ava';
import puppeteer from 'puppeteer-core';
import { createUser } from '../helpers/factories';
import { useStack } from '../helpers/stack';

const stack = useStack(test, { env: { RATE_LIMIT_ANONYMOUS: '100000' } });

test('GraphiQL loads in headless Chromium from the service alone and runs a query', async (t) => {
  const s = stack();
  const user = await createUser(s.db);
  const origin = new URL(s.url).origin;
  const browser = await puppeteer.launch({
    executablePath: process.env.CHROMIUM_PATH || '/usr/bin/chromium',
    headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'],
  });
  try {
    const page = await browser.newPage();
    const local: string[] = [];
    const outside: string[] = [];
    const failed: string[] = [];
    const consoleErrors: string[] = [];
    await page.setRequestInterception(true);
    page.on('request', (req) => {
      const url = req.url();
      if (url.startsWith('data:') || url.startsWith('blob:')) return void req.continue();
      if (new URL(url).origin === origin) {
        local.push(new URL(url).pathname);
        return void req.continue();
      }
      outside.push(url);
      void req.abort();
    });
    page.on('response', (r) => {
      if (r.status() >= 400) failed.push(`${r.status()} ${r.url()}`);
    });
    page.on('requestfailed', (req) => {
      if (!req.url().startsWith('data:')) failed.push(req.url());
    });
    page.on('console', (m) => {
      if (m.type() === 'error') consoleErrors.push(m.text());
    });
    page.on('pageerror', (e) => consoleErrors.push(String(e)));

    const res = await page.goto(`${s.url}/v1/graphiql`, { waitUntil: 'networkidle0' });
    t.is(res?.status(), 200);
    // GraphiQL rendered its editor and fetched the schema by introspection.
    await page.waitForSelector('.graphiql-container', { timeout: 15_000 });
    await page.waitForSelector('.graphiql-sidebar', { timeout: 15_000 });
    t.true(local.includes('/v1/graphiql/graphiql.min.js'));
    t.true(local.includes('/v1/graphiql/react.production.min.js'));
    t.true(local.includes('/v1/gql'), 'introspection went to the service');

    // The page's own fetcher runs a query against /v1/gql with a header, as a user would.
    const answer: { data: { me: { userId: string } } } = await page.evaluate(async (token) => {
      const r = await fetch('/v1/gql', {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
        body: JSON.stringify({ query: '{ me { userId } }' }),
      });
      return (await r.json()) as { data: { me: { userId: string } } };
    }, user.token);
    t.is(answer.data.me.userId, user.id);

    t.deepEqual(outside, [], 'no request leaves the machine');
    t.deepEqual(failed, []);
    t.deepEqual(consoleErrors, []);
  } finally {
    await browser.close();
  }
});
