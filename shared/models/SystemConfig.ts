import { Model } from 'objection';

class SystemConfig extends Model {
  static override tableName = 'system_config';
  static override idColumn = 'key';
  static override jsonAttributes = ['value'];
  key!: string;
  value!: unknown;
  description!: string | null;
  updated_at!: Date;
}
