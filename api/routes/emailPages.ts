import type Router from '@koa/router';
import { createHash } from 'node:crypto';
import { AccountEmailTemplate, EMAIL_LINK_PATHS, escapeHtml } from '../../shared/emails/accountEmails';
import { notFound } from '../../shared/errors';
import { PASSWORD_MAX, PASSWORD_MIN } from '../../shared/domain/passwords';
import { z, zChars } from '../../shared/zod';
import { AppContext, AppState, defineRoute } from '../routing';
import type { ApiServices } from '../services';
import { sendHtml } from '../responses';

/**
 * Minimal pages behind the links in account mails (`APP_URL + path?token=…`), for installations
 * without a web app of their own: APP_URL unset (links then point at the API) or naming the API's
 * own host. Each page is one static HTML document: no external assets, every value escaped, one
 * inline script allowed by its hash in the Content-Security-Policy. The script posts the form as
 * JSON to the existing endpoint and shows its answer; without JavaScript the form still posts there
 * (form-encoded, which the API accepts) and the browser shows the JSON answer.
 *
 * Confirmation pages never use the token on GET: mail scanners open links, and a one-time token
 * must survive that until the person presses the button. The email change and email link pages
 * post to POST /v1/auth/verify-email, which accepts those tokens without a signed-in user (the token
 * was issued to the user who asked and proves the new mailbox); /v1/users/email/verify and
 * /v1/users/email-link/verify need the user's own credential, which a browser here does not have.
 */

interface Field {
  name: string;
  label: string;
  type: 'email' | 'password';
  autocomplete: string;
  /** A password field of a new password: length bounds, and a second field to repeat it. */
  newPassword?: boolean;
}

interface PageForm {
  heading?: string;
  /** The JSON endpoint the form posts to. */
  endpoint: string;
  /** Whether the link's token goes with the form. */
  token: boolean;
  fields: Field[];
  button: string;
  /** Shown before the endpoint's own message (if any) when it answers 2xx. */
  success: string;
  /** `login`: the answer is a session (or a second-factor challenge), shown as such. */
  kind?: 'login';
}

interface Page {
  template: AccountEmailTemplate;
  title: string;
  intro: string;
  forms: PageForm[];
}

const email: Field = { name: 'email', label: 'Email address', type: 'email', autocomplete: 'email' };

/** One page per link path of shared/emails/accountEmails.ts. */
export const EMAIL_PAGES: Page[] = [
  {
    template: 'registration',
    title: 'Confirm your email address',
    intro: 'Press the button to confirm your address and create your account.',
    forms: [
      {
        endpoint: '/v1/auth/register/verify',
        token: true,
        fields: [],
        button: 'Create my account',
        success: 'Your account is ready: sign in with your email address and password.',
      },
    ],
  },
  {
    template: 'email_verification',
    title: 'Verify your email address',
    intro: 'Press the button to verify your address; you can then sign in with it.',
    forms: [{ endpoint: '/v1/auth/verify-email', token: true, fields: [], button: 'Verify my address', success: '' }],
  },
  {
    template: 'email_change',
    title: 'Confirm your new email address',
    intro: 'Press the button to make this the email address of your account.',
    forms: [{ endpoint: '/v1/auth/verify-email', token: true, fields: [], button: 'Change my address', success: '' }],
  },
  {
    template: 'email_link',
    title: 'Confirm email sign-in',
    intro: 'Press the button to add sign-in with this email address and the password you chose to your account.',
    forms: [{ endpoint: '/v1/auth/verify-email', token: true, fields: [], button: 'Add email sign-in', success: '' }],
  },
  {
    template: 'password_reset',
    title: 'Choose a new password',
    intro: 'Setting a new password signs you out on every device.',
    forms: [
      {
        endpoint: '/v1/auth/reset-password/confirm',
        token: true,
        fields: [
          {
            name: 'password',
            label: 'New password',
            type: 'password',
            autocomplete: 'new-password',
            newPassword: true,
          },
        ],
        button: 'Set the new password',
        success: '',
      },
    ],
  },
  {
    template: 'account_exists',
    title: 'Sign in',
    intro: 'Sign in with the email address and password of your account.',
    forms: [
      {
        endpoint: '/v1/auth/login',
        token: false,
        fields: [email, { name: 'password', label: 'Password', type: 'password', autocomplete: 'current-password' }],
        button: 'Sign in',
        success: 'Signed in.',
        kind: 'login',
      },
      {
        heading: 'Forgot your password?',
        endpoint: '/v1/auth/reset-password/request',
        token: false,
        fields: [email],
        button: 'Send me a reset link',
        success: '',
      },
    ],
  },
];

const STYLE =
  'body{font:16px/1.5 system-ui,sans-serif;max-width:34rem;margin:3rem auto;padding:0 1rem;color:#1d1d1d}' +
  'label{display:block;margin:.75rem 0}input{display:block;width:100%;box-sizing:border-box;padding:.45rem;font:inherit}' +
  'button{margin-top:.75rem;padding:.5rem 1rem;font:inherit}form{margin:1.5rem 0}output{display:block;margin-top:1rem;white-space:pre-wrap;overflow-wrap:anywhere}' +
  '.error{color:#a40000}.ok{color:#1b5e20}';

/** Posts each form as JSON to its endpoint and shows the answer; everything is written as text, never as HTML. */
const SCRIPT = `document.querySelectorAll('form[data-success]').forEach(function (form) {
  var out = form.querySelector('output');
  var button = form.querySelector('button');
  function show(text, ok) { out.textContent = text; out.className = ok ? 'ok' : 'error'; }
  form.addEventListener('submit', function (ev) {
    ev.preventDefault();
    var data = {};
    new FormData(form).forEach(function (v, k) { data[k] = String(v); });
    if ('password_repeat' in data) {
      if (data.password !== data.password_repeat) return show('The two passwords differ.', false);
      delete data.password_repeat;
    }
    button.disabled = true;
    show('…', true);
    fetch(form.getAttribute('action'), { method: 'POST', credentials: 'omit', headers: { 'content-type': 'application/json', accept: 'application/json' }, body: JSON.stringify(data) })
      .then(function (res) {
        return res.json().catch(function () { return {}; }).then(function (body) {
          button.disabled = false;
          if (!res.ok) return show((body && body.message) || ('Request failed (' + res.status + ').'), false);
          if (form.dataset.kind === 'login' && body.requires_two_factor) return show('This account needs a second factor: sign in with an app that supports two-factor authentication.', false);
          var text = [form.dataset.success, body.message].filter(Boolean).join(' ');
          if (form.dataset.kind === 'login' && body.session) {
            text += ' You are ' + body.data.username + '. Session token (send it as "Authorization: Bearer <token>", e.g. in the API reference at /v1/swagger-ui/), valid until ' + body.session.expires + ':\\n' + body.session.sessionToken;
          }
          if (res.status === 201 || body.success || body.session) form.querySelectorAll('input,button').forEach(function (el) { el.disabled = true; });
          show(text, true);
        });
      })
      .catch(function () { button.disabled = false; show('The service could not be reached; try again.', false); });
  });
});`;

const hash = (s: string) => `'sha256-${createHash('sha256').update(s).digest('base64')}'`;

/** Nothing loads but the page's own style and script; the script may only talk to this origin. */
const CSP = [
  "default-src 'none'",
  `script-src ${hash(SCRIPT)}`,
  `style-src ${hash(STYLE)}`,
  "connect-src 'self'",
  "form-action 'self'",
  "base-uri 'none'",
  "frame-ancestors 'none'",
].join('; ');

function renderField(f: Field): string {
  const bounds = f.newPassword ? ` minlength="${PASSWORD_MIN}" maxlength="${PASSWORD_MAX}"` : '';
  const input = (name: string, label: string) =>
    `<label>${escapeHtml(label)}<input type="${f.type}" name="${name}" autocomplete="${f.autocomplete}" required${bounds}></label>`;
  return f.newPassword
    ? input(f.name, `${f.label} (at least ${PASSWORD_MIN} characters)`) + '\n' + input('password_repeat', 'Repeat it')
    : input(f.name, f.label);
}

function renderForm(form: PageForm, token: string | undefined): string {
  return [
    form.heading ? `<h2>${escapeHtml(form.heading)}</h2>` : '',
    `<form method="post" action="${escapeHtml(form.endpoint)}" data-success="${escapeHtml(form.success)}"${form.kind ? ` data-kind="${form.kind}"` : ''}>`,
    form.token ? `<input type="hidden" name="token" value="${escapeHtml(token ?? '')}">` : '',
    ...form.fields.map(renderField),
    `<button type="submit">${escapeHtml(form.button)}</button>`,
    '<output role="status" aria-live="polite"></output>',
    '</form>',
  ]
    .filter(Boolean)
    .join('\n');
}

/** The HTML of one page; a page whose link lost its token says so instead of showing a form that cannot work. */
function renderEmailPage(page: Page, token: string | undefined): string {
  const needsToken = page.forms.some((f) => f.token);
  const body =
    needsToken && !token
      ? '<p class="error">This link is incomplete: open the whole link from the email (it ends with <code>?token=</code> and a long code).</p>'
      : `<p>${escapeHtml(page.intro)}</p>\n${page.forms.map((f) => renderForm(f, token)).join('\n')}`;
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer"><title>${escapeHtml(page.title)}</title><style>${STYLE}</style></head>
<body><main><h1>${escapeHtml(page.title)}</h1>
${body}
</main><script>${SCRIPT}</script></body></html>
`;
}

/** Stands for the link's token while a page is rendered once (escapeHtml leaves it as it is). */
const TOKEN_MARK = '\u0000token\u0000';

/**
 * A page rendered once, at module load: its bytes without a token, and the text around each place
 * the token goes (escaped) for a link that has one. A request only escapes and joins its token.
 */
function prerender(page: Page): (token: string | undefined) => string | Buffer {
  const plain = Buffer.from(renderEmailPage(page, undefined));
  const parts = renderEmailPage(page, TOKEN_MARK).split(TOKEN_MARK);
  return (token) => (token === undefined ? plain : parts.join(escapeHtml(token)));
}

/** APP_URL's host (lower-cased), parsed once per value. */
let appHost: { url: string; host: string } | undefined;

/**
 * Whether this API serves the pages: not when APP_URL names another host, whose web app serves the
 * links itself (the host is compared, so a proxy that rewrites the scheme still counts as this API).
 */
export function servesEmailPages(ctx: AppContext): boolean {
  const { appUrl, appUrlSet } = ctx.services.config;
  if (!appUrlSet) return true;
  if (appHost?.url !== appUrl) appHost = { url: appUrl, host: new URL(appUrl).host.toLowerCase() };
  return appHost.host === ctx.host.toLowerCase();
}

/** GET routes for every link path of the account mails (see the module comment). */
export function emailPageRoutes(router: Router<AppState, { services: ApiServices }>): void {
  for (const page of EMAIL_PAGES) {
    const render = prerender(page);
    const posts = [...new Set(page.forms.map((f) => `POST ${f.endpoint}`))].join(' and ');
    defineRoute(
      router,
      {
        method: 'get',
        path: EMAIL_LINK_PATHS[page.template],
        summary: `Page: ${page.title.toLowerCase()} (link of the ${page.template} mail)`,
        description: `A minimal HTML page whose form posts to ${posts}. Served only without a web app of its own (APP_URL unset or naming this host); 404 otherwise.`,
        tags: ['pages'],
        auth: 'public',
        query: z.object({ token: zChars({ max: 500 }).optional() }),
        responses: {
          200: { description: 'HTML page', schema: z.string(), contentType: 'text/html' },
          404: { description: 'APP_URL names a web app elsewhere' },
        },
      },
      (ctx, { query }) => {
        if (!servesEmailPages(ctx)) throw notFound('page');
        sendHtml(ctx, render(query.token || undefined), CSP);
      },
    );
  }
}
