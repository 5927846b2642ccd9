import type { Knex } from 'knex';
import { writeOutbox } from '../outbox';
import { escapeHtml, EmailLocale } from './accountEmails';

/** What the reporting user is told when an administrator updates their report. */
export interface AuditReportMailVars {
  status: string;
  eventType: string;
  eventAt: Date;
  notes: string | null;
}

const STATUS_WORDS: Record<EmailLocale, Record<string, string>> = {
  en: { pending: 'pending', reviewed: 'reviewed', resolved: 'resolved', dismissed: 'dismissed' },
  de: { pending: 'offen', reviewed: 'geprüft', resolved: 'erledigt', dismissed: 'verworfen' },
};

/** Subject and paragraphs of the audit report status mail (spec §6 email notifications). */
export function renderAuditReportMail(locale: EmailLocale, v: AuditReportMailVars) {
  const at = v.eventAt.toISOString().replace('T', ' ').slice(0, 16) + ' UTC';
  const status = STATUS_WORDS[locale][v.status] ?? v.status;
  const paragraphs =
    locale === 'de'
      ? [
          'Hallo,',
          `deine Meldung zum Ereignis „${v.eventType}“ vom ${at} hat jetzt den Status: ${status}.`,
          ...(v.notes ? [`Anmerkung: ${v.notes}`] : []),
          'Du findest deine Meldungen in deinem Aktivitätsprotokoll.',
        ]
      : [
          'Hello,',
          `your report of the "${v.eventType}" event of ${at} is now: ${status}.`,
          ...(v.notes ? [`Notes: ${v.notes}`] : []),
          'Your reports are listed in your activity log.',
        ];
  const subject =
    locale === 'de' ? `Deine Meldung wurde aktualisiert: ${status}` : `Your security report was updated: ${status}`;
  const text = paragraphs.join('\n\n') + '\n';
  const html = `<!doctype html><html><body>\n${paragraphs.map((p) => `<p>${escapeHtml(p)}</p>`).join('\n')}\n</body></html>`;
  return { subject, text, html };
}

/**
 * Writes the mail to email_outbox and its `email` job to the side-effect outbox inside `trx`: it is
 * sent iff the review commits (call `outbox.wake()` after the commit). Returns the email_outbox id.
 */
export async function writeAuditReportMail(
  trx: Knex.Transaction,
  to: { address: string; userId: string; locale: EmailLocale },
  vars: AuditReportMailVars,
): Promise<string> {
  const { subject, text, html } = renderAuditReportMail(to.locale, vars);
  const [row] = await trx('email_outbox')
    .insert({
      to_address: to.address,
      subject,
      text_body: text,
      html_body: html,
      template: 'audit_report_status',
      user_id: to.userId,
      status: 'queued',
    })
    .returning('id');
  await writeOutbox(trx, 'email', { outboxId: (row as { id: string }).id });
  return (row as { id: string }).id;
}
