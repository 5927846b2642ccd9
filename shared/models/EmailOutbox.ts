import { AppModel } from './AppModel';

export class EmailOutbox extends AppModel {
  static override tableName = 'email_outbox';
  id!: string;
  to_address!: string;
  subject!: string;
  text_body!: string;
  html_body!: string | null;
  template!: string | null;
  user_id!: string | null;
  /** The link's one-time token, AES-256-GCM sealed (shared/emails/outbox.ts); null once the row is done with. */
  token_sealed!: string | null;
  status!: 'queued' | 'sent' | 'logged' | 'failed';
  attempts!: number;
  last_error!: string | null;
  /** Transient delivery failures are retried until then: the link token's expiry, else 24 h after writing. */
  deliver_until!: Date;
  created_at!: Date;
  sent_at!: Date | null;
}
