import { BaseModel } from './BaseModel';

export class Platform extends BaseModel {
  static override tableName = 'platforms';
  id!: string;
  name!: string;
  slug!: string;
  is_oauth!: boolean;
  enabled!: boolean;
  two_factor_supported!: boolean;
  two_factor_required!: boolean;
  created_at!: Date;
  declare updated_at: Date;
}
