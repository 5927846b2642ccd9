import { BaseModel } from './BaseModel';

/**
 * A system setting (decisions.md "Settings"), addressed by key. `value` is any JSON value; it is
 * written as JSON text by the commands (shared/commands/settings.ts), since a bare string or
 * number is not an object Objection would serialise for the jsonb column.
 */
export class Setting extends BaseModel {
  static override tableName = 'settings';
  static override idColumn = 'key';
  key!: string;
  value!: unknown;
  description!: string | null;
  is_public!: boolean;
  created_at!: Date;
  declare updated_at: Date;
}
