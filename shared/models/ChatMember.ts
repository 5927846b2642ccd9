import { BaseModel } from './BaseModel';

/** A member of a synced guild (spec §2 Chat member); `guild_id` is the guild's internal UUID. */
export class ChatMember extends BaseModel {
  static override tableName = 'chat_members';
  id!: string;
  guild_id!: string;
  user_id!: string;
  username!: string;
  discriminator!: string;
  global_name!: string | null;
  nickname!: string | null;
  avatar!: string | null;
  bot!: boolean;
  system!: boolean;
  joined_at!: Date | null;
  premium_since!: Date | null;
  deaf!: boolean;
  mute!: boolean;
  pending!: boolean;
  communication_disabled_until!: Date | null;
  roles!: string[];
  created_at!: Date;
  declare updated_at: Date;
}
