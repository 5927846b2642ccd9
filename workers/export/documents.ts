import type { DataExport } from '../../shared/presenters/dataExport';
import { ExportLocale, ExportTexts, exportTexts, formatDate, SectionName } from './i18n';

/** Sections in the order the report and the README show them. */
export const SECTION_ORDER: SectionName[] = [
  'exportInfo',
  'user',
  'platformAccounts',
  'connectedApps',
  'ownedApps',
  'apiKeys',
  'roles',
  'twoFactorAuth',
  'deletionStatus',
  'exportLogs',
  'sessions',
];

/**
 * Entries of one list the report prints; data.json holds them all. Chromium lays out a table per
 * entry: a user with thousands of sessions or keys took longer than the print timeout, on every
 * retry, and could never export.
 */
export const REPORT_LIST_LIMIT = 500;

const escapeHtml = (s: string) =>
  s.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]!);

const capitalise = (s: string) => s.charAt(0).toUpperCase() + s.slice(1);

/** One value as the report shows it: dates in the locale's words, yes/no, lists joined. */
function displayValue(field: string, v: unknown, locale: ExportLocale, t: ExportTexts): string {
  if (v === null || v === undefined) return field.endsWith('At') ? t.never : '—';
  if (typeof v === 'boolean') return v ? t.yes : t.no;
  if (Array.isArray(v)) return v.length ? v.join(', ') : '—';
  if (typeof v === 'string' && field.endsWith('At')) return formatDate(locale, v, t);
  if (typeof v === 'number') return new Intl.NumberFormat(locale).format(v);
  return String(v);
}

function recordTable(
  row: Record<string, unknown>,
  fields: Record<string, string>,
  locale: ExportLocale,
  t: ExportTexts,
): string {
  const cells = Object.keys(row)
    .map(
      (k) =>
        `<tr><th>${escapeHtml(capitalise(fields[k] ?? k))}</th><td>${escapeHtml(displayValue(k, row[k], locale, t))}</td></tr>`,
    )
    .join('');
  return `<table>${cells}</table>`;
}

/**
 * The report's fonts, first to last: Latin, Greek, Cyrillic, Arabic and Hebrew from DejaVu, Chinese,
 * Japanese and Korean from Noto Sans CJK, emoji from Noto Color Emoji (scripts/provision.sh installs
 * them with Chromium: fonts-dejavu-core, fonts-noto-cjk, fonts-noto-color-emoji). Without a font for
 * a character Chromium prints an empty box: a name in Japanese would be unreadable in the report.
 */
export const REPORT_FONTS =
  "'DejaVu Sans', 'Liberation Sans', 'Noto Sans CJK SC', 'Noto Sans CJK JP', 'Noto Sans CJK KR', 'Noto Color Emoji', sans-serif";

/**
 * The HTML the report PDF is printed from: every section with localised headings, labels and
 * dates. Static: no script, nothing loaded from elsewhere (the page's CSP forbids it too); every
 * value is escaped.
 */
export function reportHtml(data: DataExport, locale: ExportLocale): string {
  const t = exportTexts(locale);
  const parts: string[] = [];
  for (const name of SECTION_ORDER) {
    if (name === 'exportInfo') continue;
    const s = t.sections[name];
    const value = data[name] as unknown;
    let body: string;
    if (Array.isArray(value)) {
      const shown = value.slice(0, REPORT_LIST_LIMIT);
      const more = value.length - shown.length;
      body = value.length
        ? shown.map((item) => recordTable(item as Record<string, unknown>, s.fields, locale, t)).join('') +
          (more > 0
            ? `<p class="none">${escapeHtml(t.moreInData(new Intl.NumberFormat(locale).format(more)))}</p>`
            : '')
        : `<p class="none">${escapeHtml(t.none)}</p>`;
    } else body = recordTable(value as Record<string, unknown>, s.fields, locale, t);
    parts.push(`<section><h2>${escapeHtml(s.title)}</h2><p class="intro">${escapeHtml(s.intro)}</p>${body}</section>`);
  }
  return `<!doctype html>
<html lang="${locale}"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'">
<title>${escapeHtml(t.reportTitle)}</title>
<style>
body { font-family: ${REPORT_FONTS}; font-size: 10pt; color: #222; }
h1 { font-size: 18pt; margin: 0 0 4pt; } h2 { font-size: 13pt; margin: 16pt 0 4pt; border-bottom: 1px solid #999; }
.meta, .intro, .none { color: #555; margin: 2pt 0 6pt; } .privacy { font-size: 8.5pt; color: #555; }
table { border-collapse: collapse; width: 100%; margin: 0 0 8pt; page-break-inside: avoid; }
th, td { text-align: left; vertical-align: top; padding: 2pt 4pt; border: 1px solid #ddd; word-break: break-word; }
th { width: 38%; font-weight: normal; color: #444; background: #f4f4f4; }
</style></head><body>
<h1>${escapeHtml(t.reportTitle)}</h1>
<p class="meta">${escapeHtml(t.generatedFor)}: ${escapeHtml(data.user.username)} · ${escapeHtml(t.generatedAt)}: ${escapeHtml(formatDate(locale, data.exportInfo.exportedAt, t))}</p>
<p class="privacy">${escapeHtml(t.privacyNote)}</p>
${parts.join('\n')}
</body></html>`;
}

/** README.txt: what each file is and what every section and field of data.json means, in the locale. */
export function readmeText(data: DataExport, locale: ExportLocale): string {
  const t = exportTexts(locale);
  const lines = [
    t.readmeTitle,
    '='.repeat(t.readmeTitle.length),
    '',
    `${t.generatedFor}: ${data.user.username}`,
    `${t.generatedAt}: ${formatDate(locale, data.exportInfo.exportedAt, t)}`,
    '',
    t.readmeIntro,
    '',
    t.filesHeading,
    '-'.repeat(t.filesHeading.length),
    `- ${t.files.dataJson}`,
    `- ${t.files.reportPdf}`,
    `- ${t.files.readmeTxt}`,
    '',
    t.privacyNote,
    '',
    t.fieldsHeading,
    '-'.repeat(t.fieldsHeading.length),
  ];
  for (const name of SECTION_ORDER) {
    const s = t.sections[name];
    lines.push('', `${name} (${s.title})`, `  ${s.intro}`);
    for (const [field, meaning] of Object.entries(s.fields)) lines.push(`  - ${field}: ${meaning}`);
  }
  return lines.join('\n') + '\n';
}
