import { parseIsoInstant, z, zChars, zInput } from '../zod';
import { SNOWFLAKE } from './chat';

/**
 * The chat bot's answer to a sync request (ChatSyncResponse 111, decoded by protobufjs: camelCase,
 * absent fields undefined) checked before anything is written, so a bad answer fails the sync with
 * a message naming the field instead of a database error halfway through.
 */

const snowflake = z.string().regex(SNOWFLAKE, 'must be a snowflake (digits)');
const text = (max: number, min = 0) => zChars({ max, min });
/** An ISO 8601 date-time; without an offset it is UTC, whatever the time zone of the process reading it. */
const timestamp = z
  .string()
  .refine((v) => parseIsoInstant(v) !== null, 'must be an ISO 8601 timestamp')
  .transform((v) => parseIsoInstant(v)!.toISOString());
const int = (min: number, max: number) => z.number().int().min(min).max(max);

export const botGuild = z.object({
  guildId: snowflake,
  name: text(255, 1),
  icon: text(128).optional(),
  ownerId: snowflake.optional(),
  memberCount: int(0, 2_000_000_000).default(0),
  boostCount: int(0, 2_000_000_000).default(0),
  premiumTier: int(0, 3).default(0),
  botJoinedAt: timestamp.optional(),
});

export const botChannel = z.object({
  channelId: snowflake,
  guildId: snowflake,
  name: text(255),
  channelTypeRaw: int(0, 1000).default(0),
  parentId: snowflake.optional(),
  position: int(-2_000_000_000, 2_000_000_000).default(0),
  topic: text(4096).optional(),
  nsfw: z.boolean().default(false),
});

export const botRole = z.object({
  roleId: snowflake,
  guildId: snowflake,
  name: text(255),
  position: int(-2_000_000_000, 2_000_000_000).default(0),
  permissions: z
    .string()
    .regex(/^\d{1,30}$/, 'must be a decimal bit set')
    .default('0'),
  color: int(0, 0xffffff).default(0),
});

export const botMember = z.object({
  guildId: snowflake.optional(),
  userId: snowflake,
  username: text(255, 1),
  discriminator: text(8).default('0'),
  globalName: text(255).optional(),
  nickname: text(255).optional(),
  avatar: text(128).optional(),
  bot: z.boolean().default(false),
  system: z.boolean().default(false),
  joinedAt: timestamp.optional(),
  premiumSince: timestamp.optional(),
  deaf: z.boolean().default(false),
  mute: z.boolean().default(false),
  pending: z.boolean().default(false),
  communicationDisabledUntil: timestamp.optional(),
  roles: z.array(snowflake).default([]),
});

export type BotGuild = z.infer<typeof botGuild>;
export type BotChannel = z.infer<typeof botChannel>;
export type BotRole = z.infer<typeof botRole>;
export type BotMember = z.infer<typeof botMember>;

/** Parses `items` (an answer's repeated field); throws an Error naming the first bad element's field. */
export function parseBotList<T extends z.ZodTypeAny>(field: string, schema: T, items: unknown): Array<z.infer<T>> {
  if (items === undefined) return [];
  if (!Array.isArray(items)) throw new Error(`${field}: must be a list`);
  const out: Array<z.infer<T>> = new Array(items.length);
  // The text rule of every input first: a NUL or a lone surrogate is named at its field here, not
  // refused by PostgreSQL as a 400 the caller of the sync did not cause.
  const checked = zInput(schema);
  for (let i = 0; i < items.length; i++) {
    const r = checked.safeParse(items[i]);
    if (!r.success) {
      const issue = r.error.issues[0];
      const path = issue.path.map((p) => String(p).replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`)).join('.');
      throw new Error(`${field}[${i}]${path ? `.${path}` : ''}: ${issue.message}`);
    }
    out[i] = r.data;
  }
  return out;
}
