import { BaseModel } from './BaseModel';

/** A guild the chat bot is in (spec §2 Chat guild): `id` is ours, `guild_id` the platform's snowflake. */
export class ChatGuild extends BaseModel {
  static override tableName = 'chat_guilds';
  id!: string;
  guild_id!: string;
  name!: string;
  icon!: string | null;
  owner_id!: string | null;
  member_count!: number;
  boost_count!: number;
  premium_tier!: number;
  bot_joined_at!: Date | null;
  last_synced_at!: Date | null;
  members_synced_at!: Date | null;
  created_at!: Date;
  declare updated_at: Date;
}
