import { AppModel } from './AppModel';

export class AuditEvent extends AppModel {
  static override tableName = 'audit_events';
  static override jsonAttributes = ['metadata'];
  id!: string;
  user_id!: string | null;
  event_type!: string;
  resource_type!: string | null;
  resource_id!: string | null;
  actor_id!: string | null;
  ip_address!: string | null;
  user_agent!: string | null;
  description!: string | null;
  metadata!: Record<string, unknown>;
  status!: 'success' | 'failure';
  error_message!: string | null;
  country_code!: string | null;
  country_name!: string | null;
  city!: string | null;
  region!: string | null;
  source_service!: string;
  is_reported!: boolean;
  created_at!: Date;
}
