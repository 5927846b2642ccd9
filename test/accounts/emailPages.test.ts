import test from 'ava';
import { createHash } from 'node:crypto';
import vm from 'node:vm';
import { EMAIL_LINK_PATHS } from '../../shared/emails/accountEmails';
import { EMAIL_PAGES, servesEmailPages } from '../../api/routes/emailPages';
import type { AppContext } from '../../api/routing';
import { createUser } from '../helpers/factories';
import { useStack } from '../helpers/stack';
import { Mailbox, ReceivedMail, startMailbox } from '../helpers/mailbox';
import { freshEmail } from '../helpers/accounts';

// No APP_URL: the links of the mails point at the API itself, which serves the pages.
let box: Mailbox | undefined;
const env: Record<string, string> = { RATE_LIMIT_ANONYMOUS: '100000' };
test.before(async () => {
  box = await startMailbox();
  env.SMTP_URL = box.url;
});
const stack = useStack(test, { env, workers: true });
test.after.always(async () => {
  await box?.close();
});

const TOKEN = 'x'.repeat(43);

/** The `action` of the page's first form and the values of its named inputs. */
function firstForm(html: string): { action: string; inputs: Record<string, string> } {
  const form = /<form method="post" action="([^"]+)"[^>]*>([\s\S]*?)<\/form>/.exec(html);
  if (!form) throw new Error(`no form in ${html}`);
  const inputs: Record<string, string> = {};
  for (const m of form[2].matchAll(/<input type="(\w+)" name="(\w+)"(?: value="([^"]*)")?/g)) inputs[m[2]] = m[3] ?? '';
  return { action: form[1], inputs };
}

/** Path and query of the first link in a mail, opened against the test server. */
function linkPath(mail: ReceivedMail): string {
  const link = /https?:\/\/\S+?token=[A-Za-z0-9_\-%.~]+/.exec(mail.text)?.[0];
  if (!link) throw new Error(`no link in ${mail.text}`);
  const url = new URL(link);
  return url.pathname + url.search;
}

test('every link path of the account mails serves an HTML page with a form, a CSP and no external assets', async (t) => {
  const s = stack();
  t.deepEqual(EMAIL_PAGES.map((p) => p.template).sort(), Object.keys(EMAIL_LINK_PATHS).sort());
  for (const [template, path] of Object.entries(EMAIL_LINK_PATHS)) {
    const r = await s.request('GET', `${path}?token=${TOKEN}`);
    t.is(r.status, 200, `${template}: ${r.text}`);
    t.regex(r.headers.get('content-type') ?? '', /^text\/html/);
    t.regex(r.text, /<form method="post" action="\/v1\/auth\/[a-z/-]+"/, template);
    const csp = r.headers.get('content-security-policy') ?? '';
    t.regex(csp, /default-src 'none'/);
    t.regex(csp, /script-src 'sha256-[A-Za-z0-9+/=]+'/);
    t.false(csp.includes('unsafe-inline'));
    t.is(r.headers.get('cache-control'), 'no-store');
    t.is(r.headers.get('referrer-policy'), 'no-referrer');
    t.false(/\b(src|href)="(https?:)?\/\//.test(r.text), `${template} loads nothing from elsewhere`);
    // The inline script parses, and the CSP allows exactly it (checked in Chromium by hand too).
    const script = /<script>([\s\S]*?)<\/script>/.exec(r.text)![1];
    t.notThrows(() => new vm.Script(script));
    t.true(csp.includes(`'sha256-${createHash('sha256').update(script).digest('base64')}'`));
  }
  const doc = await s.request('GET', '/v1/openapi.json');
  for (const path of Object.values(EMAIL_LINK_PATHS)) t.truthy(doc.body.paths[path]?.get, path);
});

test('the pages escape what the link carries and say so when its token is missing', async (t) => {
  const s = stack();
  const evil = encodeURIComponent('"><script>alert(1)</script>');
  const r = await s.request('GET', `${EMAIL_LINK_PATHS.password_reset}?token=${evil}`);
  t.is(r.status, 200);
  t.false(r.text.includes('<script>alert(1)'));
  t.true(r.text.includes('value="&quot;&gt;&lt;script&gt;alert(1)&lt;/script&gt;"'));
  // Pages are rendered once: each request still carries its own token, and a page without one stays tokenless.
  const [one, two] = await Promise.all(
    ['first-token', 'second-token'].map((tok) => s.request('GET', `${EMAIL_LINK_PATHS.password_reset}?token=${tok}`)),
  );
  t.true(one.text.includes('value="first-token"') && !one.text.includes('second-token'));
  t.true(two.text.includes('value="second-token"') && !two.text.includes('first-token'));
  t.regex((await s.request('GET', EMAIL_LINK_PATHS.password_reset)).text, /This link is incomplete/);
  const bare = await s.request('GET', EMAIL_LINK_PATHS.registration);
  t.is(bare.status, 200);
  t.regex(bare.text, /This link is incomplete/);
  t.false(bare.text.includes('<form'));
  // Confirmation pages do not use the token on GET (mail scanners open links): the page is a button.
  t.regex(
    firstForm((await s.request('GET', `${EMAIL_LINK_PATHS.email_change}?token=${TOKEN}`)).text).action,
    /^\/v1\/auth\/verify-email$/,
  );
});

test('password reset completes through the page: mail link → page → the JSON endpoint its form posts to', async (t) => {
  const s = stack();
  const user = await createUser(s.db);
  t.is((await s.request('POST', '/v1/auth/reset-password/request', { body: { email: user.email } })).status, 202);
  const mail = await box!.waitFor(user.email);
  t.regex(mail.text, /http:\/\/localhost:3000\/auth\/reset-password\?token=/);
  const page = await s.request('GET', linkPath(mail));
  t.is(page.status, 200);
  const form = firstForm(page.text);
  t.is(form.action, '/v1/auth/reset-password/confirm');
  t.deepEqual(Object.keys(form.inputs).sort(), ['password', 'password_repeat', 'token']);
  // What the page's script sends: the form's fields as JSON, the repeated password left out.
  const done = await s.request('POST', form.action, {
    body: { token: form.inputs.token, password: 'a-new-password-1' },
  });
  t.is(done.status, 200, done.text);
  t.true(done.body.success);
  const login = await s.request('POST', '/v1/auth/login', {
    body: { email: user.email, password: 'a-new-password-1' },
  });
  t.is(login.status, 200, login.text);
  t.regex(login.body.session.sessionToken, /^sess_/);
});

test('registration completes through the page, and the form also works posted form-encoded without JavaScript', async (t) => {
  const s = stack();
  const email = freshEmail('page');
  t.is((await s.request('POST', '/v1/auth/register', { body: { email, password: 'page-password-1' } })).status, 202);
  const page = await s.request('GET', linkPath(await box!.waitFor(email)));
  const form = firstForm(page.text);
  t.is(form.action, '/v1/auth/register/verify');
  const res = await fetch(s.url + form.action, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams(form.inputs).toString(),
  });
  t.is(res.status, 201, await res.clone().text());
  t.is((await s.request('POST', '/v1/auth/login', { body: { email, password: 'page-password-1' } })).status, 200);
});

test('the pages are served only when APP_URL is unset or names this host', (t) => {
  const ctx = (appUrl: string, appUrlSet: boolean, host: string) =>
    ({ services: { config: { appUrl, appUrlSet } }, host }) as unknown as AppContext;
  t.true(servesEmailPages(ctx('http://localhost:3000', false, '127.0.0.1:4000')));
  t.true(servesEmailPages(ctx('https://api.example.org', true, 'API.example.org')));
  t.false(servesEmailPages(ctx('https://app.example.org', true, 'api.example.org')));
});
