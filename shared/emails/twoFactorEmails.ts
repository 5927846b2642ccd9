import { EmailLocale, escapeHtml } from './accountEmails';

/**
 * The two-factor mails of spec §6, sent automatically (they cannot be turned off): enabled
 * (confirmation with platform name and time), disabled (alert), backup codes regenerated (the old
 * ones stopped working). English and German, plain text with an HTML twin of the same paragraphs.
 */
export type TwoFactorEmailTemplate = 'two_factor_enabled' | 'two_factor_disabled' | 'two_factor_backup_codes';

export interface TwoFactorEmailVars {
  username: string | null;
  /** Name of the platform the second factor was set up from. */
  platformName: string;
  at: Date;
}

function when(d: Date, locale: EmailLocale): string {
  return (
    d.toLocaleString(locale === 'de' ? 'de-DE' : 'en-GB', {
      timeZone: 'UTC',
      dateStyle: 'medium',
      timeStyle: 'short',
    }) + ' UTC'
  );
}

const hello = (locale: EmailLocale, name: string | null) =>
  `${locale === 'de' ? 'Hallo' : 'Hello'} ${name ?? ''},`.replace(' ,', ',');

type Copy = { subject: string; paragraphs: string[] };

const copy: Record<TwoFactorEmailTemplate, Record<EmailLocale, (v: TwoFactorEmailVars) => Copy>> = {
  two_factor_enabled: {
    en: (v) => ({
      subject: 'Two-factor authentication is on',
      paragraphs: [
        hello('en', v.username),
        `two-factor authentication was turned on for your account from ${v.platformName} on ${when(v.at, 'en')}.`,
        'Keep your backup codes somewhere safe: each one signs you in once if you lose your authenticator app.',
        'If this was not you, change your password and contact support at once.',
      ],
    }),
    de: (v) => ({
      subject: 'Zwei-Faktor-Authentifizierung ist aktiv',
      paragraphs: [
        hello('de', v.username),
        `die Zwei-Faktor-Authentifizierung wurde für dein Konto über ${v.platformName} am ${when(v.at, 'de')} eingeschaltet.`,
        'Bewahre deine Backup-Codes sicher auf: jeder meldet dich einmal an, falls du deine Authenticator-App verlierst.',
        'Falls das nicht du warst, ändere sofort dein Passwort und melde dich beim Support.',
      ],
    }),
  },
  two_factor_disabled: {
    en: (v) => ({
      subject: 'Two-factor authentication was turned off',
      paragraphs: [
        hello('en', v.username),
        `two-factor authentication was turned off for your account on ${when(v.at, 'en')} (it was set up from ${v.platformName}). Signing in now needs only your password or sign-in provider.`,
        'If this was not you, sign in, turn two-factor authentication back on and change your password at once.',
      ],
    }),
    de: (v) => ({
      subject: 'Zwei-Faktor-Authentifizierung wurde ausgeschaltet',
      paragraphs: [
        hello('de', v.username),
        `die Zwei-Faktor-Authentifizierung deines Kontos wurde am ${when(v.at, 'de')} ausgeschaltet (eingerichtet über ${v.platformName}). Zum Anmelden reicht jetzt dein Passwort oder dein Anmeldedienst.`,
        'Falls das nicht du warst, melde dich an, schalte sie wieder ein und ändere sofort dein Passwort.',
      ],
    }),
  },
  two_factor_backup_codes: {
    en: (v) => ({
      subject: 'New backup codes for your account',
      paragraphs: [
        hello('en', v.username),
        `new two-factor backup codes were created for your account on ${when(v.at, 'en')}. Your old backup codes no longer work.`,
        'If this was not you, change your password and contact support at once.',
      ],
    }),
    de: (v) => ({
      subject: 'Neue Backup-Codes für dein Konto',
      paragraphs: [
        hello('de', v.username),
        `für dein Konto wurden am ${when(v.at, 'de')} neue Backup-Codes für die Zwei-Faktor-Authentifizierung erstellt. Deine alten Backup-Codes funktionieren nicht mehr.`,
        'Falls das nicht du warst, ändere sofort dein Passwort und melde dich beim Support.',
      ],
    }),
  },
};

/** Subject, text and HTML of one two-factor mail. */
export function renderTwoFactorEmail(
  template: TwoFactorEmailTemplate,
  locale: EmailLocale,
  vars: TwoFactorEmailVars,
): { subject: string; text: string; html: string } {
  const c = copy[template][locale](vars);
  return {
    subject: c.subject,
    text: c.paragraphs.join('\n\n') + '\n',
    html: `<!doctype html><html><body>\n${c.paragraphs.map((p) => `<p>${escapeHtml(p)}</p>`).join('\n')}\n</body></html>`,
  };
}
