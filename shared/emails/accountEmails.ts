/**
 * Account emails in English and German (chosen by the user's preferred_locale). Each template is
 * plain text plus a minimal HTML twin built from the same paragraphs, so the two never disagree.
 * Links that carry a token carry it as `token=<value>` under APP_URL (architecture.md); the outbox
 * stores them with a placeholder instead and the worker puts the token in (emails/outbox.ts).
 */

export type AccountEmailTemplate =
  'registration' | 'email_verification' | 'email_change' | 'email_link' | 'password_reset' | 'account_exists';

export type EmailLocale = 'en' | 'de';

export interface AccountEmailVars {
  /** APP_URL link (with `token=` for the token mails). */
  link: string;
  /** When the token stops working. */
  expiresAt?: Date;
  username?: string | null;
  /** The address the mail is about (new address for change / link). */
  email?: string;
  /** account_exists: names of the sign-in methods the account already has. */
  providers?: string[];
}

/**
 * App paths the emailed links open; the web app posts the token to the matching API route. Without a
 * web app of its own (APP_URL unset or the API's origin) the API serves them (api/routes/emailPages.ts).
 */
export const EMAIL_LINK_PATHS: Record<AccountEmailTemplate, string> = {
  registration: '/auth/register/verify',
  email_verification: '/auth/verify-email',
  email_change: '/account/email/verify',
  email_link: '/account/email-link/verify',
  password_reset: '/auth/reset-password',
  account_exists: '/auth/login',
};

/**
 * Builds `APP_URL + path?token=…`. The path is appended to APP_URL's own path, so a web app served
 * under a sub-path (`https://host/web`) gets `https://host/web/auth/…` (a URL resolved against the
 * base would replace that path).
 */
export function emailLink(appUrl: string, template: AccountEmailTemplate, token?: string): string {
  const url = new URL(appUrl);
  url.pathname = url.pathname.replace(/\/+$/, '') + EMAIL_LINK_PATHS[template];
  url.search = '';
  url.hash = '';
  if (token) url.searchParams.set('token', token);
  return url.toString();
}

/** 'de' for German preferences (de, de-AT, …), else English: the two languages with templates. */
export function emailLocale(preferred: string | null | undefined, acceptLanguage?: string | null): EmailLocale {
  const first = preferred || acceptLanguage?.split(',')[0]?.trim() || 'en';
  return first.toLowerCase().startsWith('de') ? 'de' : 'en';
}

function when(d: Date | undefined, locale: EmailLocale): string {
  if (!d) return '';
  return (
    d.toLocaleString(locale === 'de' ? 'de-DE' : 'en-GB', {
      timeZone: 'UTC',
      dateStyle: 'medium',
      timeStyle: 'short',
    }) + ' UTC'
  );
}

type Copy = { subject: string; paragraphs: string[] };

const copy: Record<AccountEmailTemplate, Record<EmailLocale, (v: AccountEmailVars) => Copy>> = {
  registration: {
    en: (v) => ({
      subject: 'Confirm your email address',
      paragraphs: [
        'Hello,',
        `please confirm ${v.email} to finish creating your account:`,
        v.link,
        `The link works until ${when(v.expiresAt, 'en')}. If you did not sign up, ignore this email.`,
      ],
    }),
    de: (v) => ({
      subject: 'Bestätige deine E-Mail-Adresse',
      paragraphs: [
        'Hallo,',
        `bitte bestätige ${v.email}, um dein Konto fertig anzulegen:`,
        v.link,
        `Der Link ist gültig bis ${when(v.expiresAt, 'de')}. Falls du dich nicht registriert hast, ignoriere diese E-Mail.`,
      ],
    }),
  },
  email_verification: {
    en: (v) => ({
      subject: 'Verify your email address',
      paragraphs: [
        `Hello ${v.username ?? ''},`.replace(' ,', ','),
        `please verify ${v.email} to sign in with it:`,
        v.link,
        `The link works until ${when(v.expiresAt, 'en')}.`,
      ],
    }),
    de: (v) => ({
      subject: 'Bestätige deine E-Mail-Adresse',
      paragraphs: [
        `Hallo ${v.username ?? ''},`.replace(' ,', ','),
        `bitte bestätige ${v.email}, um dich damit anzumelden:`,
        v.link,
        `Der Link ist gültig bis ${when(v.expiresAt, 'de')}.`,
      ],
    }),
  },
  email_change: {
    en: (v) => ({
      subject: 'Confirm your new email address',
      paragraphs: [
        `Hello ${v.username ?? ''},`.replace(' ,', ','),
        `you asked to change the email address of your account to ${v.email}. Confirm the change here:`,
        v.link,
        `The link works until ${when(v.expiresAt, 'en')}. If you did not ask for this, ignore this email; nothing changes.`,
      ],
    }),
    de: (v) => ({
      subject: 'Bestätige deine neue E-Mail-Adresse',
      paragraphs: [
        `Hallo ${v.username ?? ''},`.replace(' ,', ','),
        `du möchtest die E-Mail-Adresse deines Kontos auf ${v.email} ändern. Bestätige die Änderung hier:`,
        v.link,
        `Der Link ist gültig bis ${when(v.expiresAt, 'de')}. Falls du das nicht warst, ignoriere diese E-Mail; es ändert sich nichts.`,
      ],
    }),
  },
  email_link: {
    en: (v) => ({
      subject: 'Confirm email sign-in for your account',
      paragraphs: [
        `Hello ${v.username ?? ''},`.replace(' ,', ','),
        `you asked to add sign-in with ${v.email} and a password to your account. Confirm it here:`,
        v.link,
        `The link works until ${when(v.expiresAt, 'en')}. If you did not ask for this, ignore this email.`,
      ],
    }),
    de: (v) => ({
      subject: 'Bestätige die Anmeldung per E-Mail für dein Konto',
      paragraphs: [
        `Hallo ${v.username ?? ''},`.replace(' ,', ','),
        `du möchtest deinem Konto die Anmeldung mit ${v.email} und Passwort hinzufügen. Bestätige das hier:`,
        v.link,
        `Der Link ist gültig bis ${when(v.expiresAt, 'de')}. Falls du das nicht warst, ignoriere diese E-Mail.`,
      ],
    }),
  },
  password_reset: {
    en: (v) => ({
      subject: 'Reset your password',
      paragraphs: [
        `Hello ${v.username ?? ''},`.replace(' ,', ','),
        'someone asked to reset the password of your account. Choose a new password here:',
        v.link,
        `The link works until ${when(v.expiresAt, 'en')}. Resetting signs you out everywhere. If you did not ask for this, ignore this email.`,
      ],
    }),
    de: (v) => ({
      subject: 'Setze dein Passwort zurück',
      paragraphs: [
        `Hallo ${v.username ?? ''},`.replace(' ,', ','),
        'jemand möchte das Passwort deines Kontos zurücksetzen. Wähle hier ein neues Passwort:',
        v.link,
        `Der Link ist gültig bis ${when(v.expiresAt, 'de')}. Beim Zurücksetzen wirst du überall abgemeldet. Falls du das nicht warst, ignoriere diese E-Mail.`,
      ],
    }),
  },
  account_exists: {
    en: (v) => ({
      subject: 'You already have an account',
      paragraphs: [
        'Hello,',
        `someone tried to register a new account with ${v.email}, but this address already belongs to an account` +
          (v.providers?.length ? ` (sign-in: ${v.providers.join(', ')}).` : '.'),
        `Sign in here: ${v.link}`,
        'If you forgot your password, use "Forgot password" on the sign-in page. If this was not you, ignore this email.',
      ],
    }),
    de: (v) => ({
      subject: 'Du hast bereits ein Konto',
      paragraphs: [
        'Hallo,',
        `jemand wollte mit ${v.email} ein neues Konto anlegen, aber diese Adresse gehört bereits zu einem Konto` +
          (v.providers?.length ? ` (Anmeldung: ${v.providers.join(', ')}).` : '.'),
        `Hier anmelden: ${v.link}`,
        'Falls du dein Passwort vergessen hast, nutze „Passwort vergessen“ auf der Anmeldeseite. Falls das nicht du warst, ignoriere diese E-Mail.',
      ],
    }),
  },
};

/** Escapes text for HTML content and double- or single-quoted attribute values. */
export const escapeHtml = (s: string) =>
  s.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]!);

/** Subject, text and HTML of one account email. */
export function renderAccountEmail(
  template: AccountEmailTemplate,
  locale: EmailLocale,
  vars: AccountEmailVars,
): { subject: string; text: string; html: string } {
  const c = copy[template][locale](vars);
  const text = c.paragraphs.join('\n\n') + '\n';
  const html = c.paragraphs
    .map((p) =>
      p === vars.link ? `<p><a href="${escapeHtml(p)}">${escapeHtml(p)}</a></p>` : `<p>${escapeHtml(p)}</p>`,
    )
    .join('\n');
  return { subject: c.subject, text, html: `<!doctype html><html><body>\n${html}\n</body></html>` };
}
