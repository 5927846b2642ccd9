import { AppModel } from './AppModel';

export class Session extends AppModel {
  static override tableName = 'sessions';
  id!: string;
  token_hash!: string;
  user_id!: string;
  expires_at!: Date;
  created_at!: Date;
  last_activity_at!: Date;
  ip_address!: string | null;
  user_agent!: string | null;
  platform_slug!: string | null;
}
