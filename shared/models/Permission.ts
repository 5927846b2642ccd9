import { BaseModel } from './BaseModel';

export class Permission extends BaseModel {
  static override tableName = 'permissions';
  id!: string;
  resource!: string;
  action!: string;
  description!: string | null;
  created_at!: Date;
  declare updated_at: Date;
}
