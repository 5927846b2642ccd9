import type { DataExport } from '../../shared/presenters/dataExport';

/** Locales the export's report and README are written in; any other preference gets English. */
export const EXPORT_LOCALES = ['en', 'de'] as const;
export type ExportLocale = (typeof EXPORT_LOCALES)[number];

/** The report's locale: the user's preferred one when it is supported here and configured, else `en`. */
export function exportLocale(preferred: string | null, supported: string[]): ExportLocale {
  const base = (preferred ?? '').toLowerCase().split(/[-_]/)[0];
  return (EXPORT_LOCALES as readonly string[]).includes(base) && supported.includes(base)
    ? (base as ExportLocale)
    : 'en';
}

export type SectionName = Exclude<keyof DataExport, 'exportInfo'> | 'exportInfo';

interface SectionText {
  title: string;
  /** One sentence on what the section holds. */
  intro: string;
  /** Every field of the section's objects, explained. */
  fields: Record<string, string>;
}

export interface ExportTexts {
  reportTitle: string;
  generatedFor: string;
  generatedAt: string;
  none: string;
  yes: string;
  no: string;
  never: string;
  readmeTitle: string;
  readmeIntro: string;
  files: { dataJson: string; reportPdf: string; readmeTxt: string };
  filesHeading: string;
  fieldsHeading: string;
  privacyNote: string;
  /** Below a list the report cut short: how many entries more data.json holds. */
  moreInData: (count: string) => string;
  sections: Record<SectionName, SectionText>;
}

const en: ExportTexts = {
  reportTitle: 'Your personal data export',
  generatedFor: 'Account',
  generatedAt: 'Created',
  none: 'None',
  yes: 'Yes',
  no: 'No',
  never: 'Never',
  readmeTitle: 'Personal data export',
  readmeIntro: 'This archive holds the data the service keeps about your account, as of the time it was created.',
  filesHeading: 'Files',
  files: {
    dataJson: 'data.json: all data in machine-readable form (JSON, UTF-8). Times are ISO 8601 in UTC.',
    reportPdf: 'report.pdf: the same data as a readable report (of a long list, its first 500 entries).',
    readmeTxt: 'README.txt: this file: what the files and fields mean.',
  },
  fieldsHeading: 'Sections and fields of data.json',
  moreInData: (count) => `… and ${count} more, in data.json (which holds every entry).`,
  privacyNote:
    'For your security the export never contains passwords, full API keys, session tokens, two-factor secrets or ' +
    'client secrets, nor hashes of them. IP addresses of sessions are partly masked.',
  sections: {
    exportInfo: {
      title: 'About this export',
      intro: 'When and in which format the export was made.',
      fields: {
        exportedAt: 'when the export was created',
        format: 'archive format (zip)',
        version: 'version of the data.json layout',
      },
    },
    user: {
      title: 'Account',
      intro: 'Your user account.',
      fields: {
        id: 'account id',
        username: 'user name',
        primaryPlatformAccountId: 'id of the sign-in account shown as your main one',
        preferredLocale: 'preferred language',
        privacyMode: 'whether privacy mode is on',
        avatarsEnabled: 'whether profile pictures are shown',
        createdAt: 'when the account was created',
        updatedAt: 'when the account was last changed',
        lastLoginAt: 'last sign-in',
        deletedAt: 'when the account was deleted (empty if not)',
      },
    },
    platformAccounts: {
      title: 'Sign-in accounts',
      intro: 'The platforms you sign in with (email/password or external sign-in).',
      fields: {
        id: 'id of the sign-in account',
        platformName: 'platform name',
        platformSlug: 'platform short name',
        platformUserId: 'your id on that platform',
        isOauth: 'whether it is an external (OAuth) sign-in',
        isPrimary: 'whether it is your main sign-in account',
        username: 'user name on the platform',
        email: 'email address',
        emailVerifiedAt: 'when the email address was confirmed',
        avatarUrl: 'profile picture address',
        createdAt: 'when it was linked',
        updatedAt: 'when it was last changed',
      },
    },
    connectedApps: {
      title: 'Connected apps',
      intro: 'Applications you allowed to access your account (OAuth consents).',
      fields: {
        id: 'id of the consent',
        clientId: 'id of the application',
        clientName: 'application name',
        homepageUrl: 'application website',
        isFirstParty: 'whether the application belongs to the service',
        scopes: 'what the application may do',
        grantedAt: 'when you allowed it',
        updatedAt: 'when the consent last changed',
      },
    },
    ownedApps: {
      title: 'Your apps',
      intro: 'OAuth applications you registered (without their secrets).',
      fields: {
        id: 'application id',
        name: 'name',
        description: 'description',
        homepageUrl: 'website',
        privacyPolicyUrl: 'privacy policy address',
        termsOfServiceUrl: 'terms of service address',
        redirectUris: 'addresses sign-ins may return to',
        allowedScopes: 'permissions the application may ask for',
        clientType: 'confidential (has a secret) or public',
        isActive: 'whether the application is active',
        createdAt: 'when it was registered',
        updatedAt: 'when it was last changed',
      },
    },
    apiKeys: {
      title: 'API keys',
      intro: 'Your API keys: only names, the first characters and permissions, never the key itself.',
      fields: {
        id: 'key id',
        name: 'name',
        description: 'description',
        keyPrefix: 'first characters of the key, to recognise it',
        scopes: 'permissions of the key',
        isActive: 'whether the key works',
        expiresAt: 'when the key expires (empty: never)',
        lastUsedAt: 'when the key was last used',
        createdAt: 'when the key was created',
        updatedAt: 'when the key was last changed',
      },
    },
    roles: {
      title: 'Roles',
      intro: 'The roles your account holds; they decide what you may do.',
      fields: {
        id: 'role id',
        name: 'role name',
        description: 'description',
        isSystem: 'whether it is a built-in role',
        requiresTwoFactor: 'whether the role requires two-factor authentication',
      },
    },
    twoFactorAuth: {
      title: 'Two-factor authentication',
      intro: 'Whether two-factor authentication protects your account (never its secret or codes).',
      fields: {
        enabled: 'whether it is on',
        enabledAt: 'when it was switched on',
        backupCodesRemaining: 'unused backup codes left',
      },
    },
    deletionStatus: {
      title: 'Account deletion',
      intro: 'Whether your account is scheduled for deletion or deleted.',
      fields: {
        isScheduledForDeletion: 'whether a deletion is scheduled',
        scheduledDeletionAt: 'when the account will be deleted',
        isDeleted: 'whether the account is deleted',
        deletedAt: 'when it was deleted',
      },
    },
    exportLogs: {
      title: 'Earlier exports',
      intro: 'Data exports made before this one.',
      fields: {
        id: 'id of the log entry',
        exportedAt: 'when the export was made',
        ipAddress: 'IP address it was requested from',
        userAgent: 'browser or program that requested it',
        exportFormat: 'archive format',
        fileSizeBytes: 'size of the archive in bytes',
        locale: 'language of the report',
        createdAt: 'when the entry was written',
      },
    },
    sessions: {
      title: 'Active sessions',
      intro: 'Devices currently signed in to your account (IP addresses partly masked).',
      fields: {
        id: 'session id',
        ipAddress: 'IP address the session was created from, partly masked',
        userAgent: 'browser or program',
        deviceType: 'desktop, mobile or tablet',
        browserName: 'browser',
        osName: 'operating system',
        provider: 'platform used to sign in (short name)',
        providerName: 'platform used to sign in',
        lastActivityAt: 'last activity',
        createdAt: 'when you signed in',
        expiresAt: 'when the session ends',
      },
    },
  },
};

const de: ExportTexts = {
  reportTitle: 'Ihr persönlicher Datenexport',
  generatedFor: 'Konto',
  generatedAt: 'Erstellt',
  none: 'Keine',
  yes: 'Ja',
  no: 'Nein',
  never: 'Nie',
  readmeTitle: 'Persönlicher Datenexport',
  readmeIntro:
    'Dieses Archiv enthält die Daten, die der Dienst zu Ihrem Konto speichert, zum Zeitpunkt der Erstellung.',
  filesHeading: 'Dateien',
  files: {
    dataJson: 'data.json: alle Daten in maschinenlesbarer Form (JSON, UTF-8). Zeitangaben nach ISO 8601 in UTC.',
    reportPdf: 'report.pdf: dieselben Daten als lesbarer Bericht (von einer langen Liste die ersten 500 Einträge).',
    readmeTxt: 'README.txt: diese Datei: was die Dateien und Felder bedeuten.',
  },
  fieldsHeading: 'Abschnitte und Felder von data.json',
  moreInData: (count) => `… und ${count} weitere, in data.json (dort sind alle Einträge enthalten).`,
  privacyNote:
    'Zu Ihrer Sicherheit enthält der Export nie Passwörter, vollständige API-Schlüssel, Sitzungstoken, ' +
    'Zwei-Faktor-Geheimnisse oder Client-Geheimnisse, auch keine Hashes davon. IP-Adressen von Sitzungen sind teilweise maskiert.',
  sections: {
    exportInfo: {
      title: 'Über diesen Export',
      intro: 'Wann und in welchem Format der Export erstellt wurde.',
      fields: {
        exportedAt: 'Zeitpunkt der Erstellung',
        format: 'Archivformat (zip)',
        version: 'Version des Aufbaus von data.json',
      },
    },
    user: {
      title: 'Benutzerkonto',
      intro: 'Ihr Benutzerkonto.',
      fields: {
        id: 'Konto-ID',
        username: 'Benutzername',
        primaryPlatformAccountId: 'ID des Anmeldekontos, das als Hauptkonto gilt',
        preferredLocale: 'bevorzugte Sprache',
        privacyMode: 'ob der Privatsphäre-Modus an ist',
        avatarsEnabled: 'ob Profilbilder angezeigt werden',
        createdAt: 'Zeitpunkt der Kontoerstellung',
        updatedAt: 'Zeitpunkt der letzten Änderung',
        lastLoginAt: 'letzte Anmeldung',
        deletedAt: 'Zeitpunkt der Löschung (leer, wenn nicht gelöscht)',
      },
    },
    platformAccounts: {
      title: 'Anmeldekonten',
      intro: 'Die Plattformen, mit denen Sie sich anmelden (E-Mail/Passwort oder externe Anmeldung).',
      fields: {
        id: 'ID des Anmeldekontos',
        platformName: 'Name der Plattform',
        platformSlug: 'Kurzname der Plattform',
        platformUserId: 'Ihre ID auf der Plattform',
        isOauth: 'ob es eine externe (OAuth-)Anmeldung ist',
        isPrimary: 'ob es Ihr Hauptkonto ist',
        username: 'Benutzername auf der Plattform',
        email: 'E-Mail-Adresse',
        emailVerifiedAt: 'Zeitpunkt der Bestätigung der E-Mail-Adresse',
        avatarUrl: 'Adresse des Profilbilds',
        createdAt: 'Zeitpunkt der Verknüpfung',
        updatedAt: 'Zeitpunkt der letzten Änderung',
      },
    },
    connectedApps: {
      title: 'Verbundene Anwendungen',
      intro: 'Anwendungen, denen Sie Zugriff auf Ihr Konto erlaubt haben (OAuth-Zustimmungen).',
      fields: {
        id: 'ID der Zustimmung',
        clientId: 'ID der Anwendung',
        clientName: 'Name der Anwendung',
        homepageUrl: 'Website der Anwendung',
        isFirstParty: 'ob die Anwendung zum Dienst gehört',
        scopes: 'was die Anwendung darf',
        grantedAt: 'Zeitpunkt der Zustimmung',
        updatedAt: 'Zeitpunkt der letzten Änderung',
      },
    },
    ownedApps: {
      title: 'Eigene Anwendungen',
      intro: 'OAuth-Anwendungen, die Sie registriert haben (ohne ihre Geheimnisse).',
      fields: {
        id: 'ID der Anwendung',
        name: 'Name',
        description: 'Beschreibung',
        homepageUrl: 'Website',
        privacyPolicyUrl: 'Adresse der Datenschutzerklärung',
        termsOfServiceUrl: 'Adresse der Nutzungsbedingungen',
        redirectUris: 'Adressen, zu denen Anmeldungen zurückkehren dürfen',
        allowedScopes: 'Berechtigungen, die die Anwendung anfragen darf',
        clientType: 'vertraulich (mit Geheimnis) oder öffentlich',
        isActive: 'ob die Anwendung aktiv ist',
        createdAt: 'Zeitpunkt der Registrierung',
        updatedAt: 'Zeitpunkt der letzten Änderung',
      },
    },
    apiKeys: {
      title: 'API-Schlüssel',
      intro: 'Ihre API-Schlüssel: nur Namen, die ersten Zeichen und Berechtigungen, nie der Schlüssel selbst.',
      fields: {
        id: 'ID des Schlüssels',
        name: 'Name',
        description: 'Beschreibung',
        keyPrefix: 'erste Zeichen des Schlüssels, zum Wiedererkennen',
        scopes: 'Berechtigungen des Schlüssels',
        isActive: 'ob der Schlüssel funktioniert',
        expiresAt: 'Ablaufzeitpunkt (leer: nie)',
        lastUsedAt: 'letzte Verwendung',
        createdAt: 'Zeitpunkt der Erstellung',
        updatedAt: 'Zeitpunkt der letzten Änderung',
      },
    },
    roles: {
      title: 'Rollen',
      intro: 'Die Rollen Ihres Kontos; sie bestimmen, was Sie dürfen.',
      fields: {
        id: 'ID der Rolle',
        name: 'Name der Rolle',
        description: 'Beschreibung',
        isSystem: 'ob es eine eingebaute Rolle ist',
        requiresTwoFactor: 'ob die Rolle Zwei-Faktor-Authentifizierung verlangt',
      },
    },
    twoFactorAuth: {
      title: 'Zwei-Faktor-Authentifizierung',
      intro: 'Ob Zwei-Faktor-Authentifizierung Ihr Konto schützt (nie ihr Geheimnis oder die Codes).',
      fields: {
        enabled: 'ob sie eingeschaltet ist',
        enabledAt: 'Zeitpunkt des Einschaltens',
        backupCodesRemaining: 'verbleibende unbenutzte Backup-Codes',
      },
    },
    deletionStatus: {
      title: 'Kontolöschung',
      intro: 'Ob Ihr Konto zur Löschung vorgemerkt oder gelöscht ist.',
      fields: {
        isScheduledForDeletion: 'ob eine Löschung vorgemerkt ist',
        scheduledDeletionAt: 'Zeitpunkt der geplanten Löschung',
        isDeleted: 'ob das Konto gelöscht ist',
        deletedAt: 'Zeitpunkt der Löschung',
      },
    },
    exportLogs: {
      title: 'Frühere Exporte',
      intro: 'Datenexporte vor diesem.',
      fields: {
        id: 'ID des Protokolleintrags',
        exportedAt: 'Zeitpunkt des Exports',
        ipAddress: 'IP-Adresse der Anfrage',
        userAgent: 'Browser oder Programm der Anfrage',
        exportFormat: 'Archivformat',
        fileSizeBytes: 'Größe des Archivs in Bytes',
        locale: 'Sprache des Berichts',
        createdAt: 'Zeitpunkt des Eintrags',
      },
    },
    sessions: {
      title: 'Aktive Sitzungen',
      intro: 'Geräte, die gerade bei Ihrem Konto angemeldet sind (IP-Adressen teilweise maskiert).',
      fields: {
        id: 'ID der Sitzung',
        ipAddress: 'IP-Adresse bei der Anmeldung, teilweise maskiert',
        userAgent: 'Browser oder Programm',
        deviceType: 'Desktop, Mobilgerät oder Tablet (desktop, mobile, tablet)',
        browserName: 'Browser',
        osName: 'Betriebssystem',
        provider: 'Plattform der Anmeldung (Kurzname)',
        providerName: 'Plattform der Anmeldung',
        lastActivityAt: 'letzte Aktivität',
        createdAt: 'Zeitpunkt der Anmeldung',
        expiresAt: 'Ende der Sitzung',
      },
    },
  },
};

/** The texts of one locale. */
export function exportTexts(locale: ExportLocale): ExportTexts {
  return locale === 'de' ? de : en;
}

/** Date and time in the locale's words, in UTC (the zone data.json uses), e.g. `24. November 2026 um 05:28 UTC`. */
export function formatDate(locale: ExportLocale, value: string | null, texts: ExportTexts): string {
  if (!value) return texts.never;
  const f = new Intl.DateTimeFormat(locale, { dateStyle: 'long', timeStyle: 'short', timeZone: 'UTC' });
  return `${f.format(new Date(value))} UTC`;
}
