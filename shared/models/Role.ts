import { Model } from 'objection';
import { BaseModel } from './BaseModel';
import { Permission } from './Permission';

export class Role extends BaseModel {
  static override tableName = 'roles';
  id!: string;
  name!: string;
  description!: string | null;
  is_system!: boolean;
  requires_two_factor!: boolean;
  created_at!: Date;
  declare updated_at: Date;

  permissions?: Permission[];

  static override get relationMappings() {
    return {
      permissions: {
        relation: Model.ManyToManyRelation,
        modelClass: Permission,
        join: {
          from: 'roles.id',
          through: { from: 'role_permissions.role_id', to: 'role_permissions.permission_id' },
          to: 'permissions.id',
        },
      },
    };
  }
}
