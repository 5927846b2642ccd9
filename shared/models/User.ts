import { Model } from 'objection';
import { BaseModel } from './BaseModel';
import { PlatformAccount } from './PlatformAccount';
import { Role } from './Role';

export class User extends BaseModel {
  static override tableName = 'users';
  id!: string;
  username!: string;
  primary_platform_account_id!: string | null;
  created_at!: Date;
  declare updated_at: Date;
  last_login_at!: Date | null;
  deleted_at!: Date | null;
  scheduled_deletion_at!: Date | null;
  privacy_mode!: boolean;
  preferred_locale!: string | null;
  avatars_enabled!: boolean;

  accounts?: PlatformAccount[];
  primaryAccount?: PlatformAccount | null;
  roles?: Role[];

  static override get relationMappings() {
    return {
      accounts: {
        relation: Model.HasManyRelation,
        modelClass: PlatformAccount,
        join: { from: 'users.id', to: 'platform_accounts.user_id' },
      },
      primaryAccount: {
        relation: Model.BelongsToOneRelation,
        modelClass: PlatformAccount,
        join: { from: 'users.primary_platform_account_id', to: 'platform_accounts.id' },
      },
      roles: {
        relation: Model.ManyToManyRelation,
        modelClass: Role,
        join: {
          from: 'users.id',
          through: { from: 'user_roles.user_id', to: 'user_roles.role_id' },
          to: 'roles.id',
        },
      },
    };
  }
}
