import { BaseModel } from './BaseModel';

/** A trip category; categories form a tree through parent_id (spec §2 Trip category). */
export class TripCategory extends BaseModel {
  static override tableName = 'trip_categories';
  id!: string;
  parent_id!: string | null;
  name!: string;
  description!: string | null;
  color!: string | null;
  is_active!: boolean;
  sort_order!: number;
  created_at!: Date;
  declare updated_at: Date;
}
