import { AppModel } from './AppModel';

export class Ban extends AppModel {
  static override tableName = 'bans';
  id!: string;
  user_id!: string;
  reason!: string | null;
  banned_by!: string | null;
  banned_at!: Date;
  expires_at!: Date | null;
  is_permanent!: boolean;
  unbanned_at!: Date | null;
  unbanned_by!: string | null;
}
