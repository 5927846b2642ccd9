import { AppModel } from './AppModel';

/** One personal data export handed to its user (spec §2 Export log entry). */
export class ExportLog extends AppModel {
  static override tableName = 'export_logs';
  id!: string;
  user_id!: string;
  exported_at!: Date;
  ip_address!: string | null;
  user_agent!: string | null;
  export_format!: string;
  /** bigint: pg returns it as text; the presenter makes it a number. */
  file_size_bytes!: number | string;
  locale!: string;
  created_at!: Date;
}
