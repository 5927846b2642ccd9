import { BaseModel } from './BaseModel';

/** A channel of a synced guild (spec §2 Chat channel); `guild_id` is the guild's internal UUID. */
export class ChatChannel extends BaseModel {
  static override tableName = 'chat_channels';
  id!: string;
  guild_id!: string;
  channel_id!: string;
  name!: string;
  channel_type_raw!: number;
  parent_id!: string | null;
  position!: number;
  topic!: string | null;
  nsfw!: boolean;
  created_at!: Date;
  declare updated_at: Date;
}
