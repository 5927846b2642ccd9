/**
 * Pure rules of the chat platform's data (spec §2 Chat guild, channel, member; decisions.md "Chat
 * bot and stream integrations"): channel type names, CDN URLs of icons and avatars, and the derived
 * member fields.
 */

/** Channel type raw values (spec §2) and their names. */
export const CHANNEL_TYPE_NAMES: Readonly<Record<number, string>> = {
  0: 'Text',
  2: 'Voice',
  4: 'Category',
  5: 'Announcement',
  10: 'Announcement Thread',
  11: 'Public Thread',
  12: 'Private Thread',
  13: 'Stage',
  15: 'Forum',
  16: 'Media',
};

/** Types whose channels carry messages: text, announcements, threads, forums and media. */
const TEXT_BASED = new Set([0, 5, 10, 11, 12, 15, 16]);
/** Types users join by voice. */
const VOICE = new Set([2, 13]);

export function channelTypeName(raw: number): string {
  return CHANNEL_TYPE_NAMES[raw] ?? 'Unknown';
}

export const isTextBased = (raw: number): boolean => TEXT_BASED.has(raw);
export const isVoice = (raw: number): boolean => VOICE.has(raw);

/** `.gif` for animated hashes (prefix `a_`), else `.png`. */
const ext = (hash: string) => (hash.startsWith('a_') ? 'gif' : 'png');

/** `{cdn}/icons/{guild_id}/{icon}.png|gif`, null without a hash. */
export function guildIconUrl(cdnUrl: string, guildId: string, icon: string | null): string | null {
  return icon ? `${cdnUrl}/icons/${guildId}/${icon}.${ext(icon)}` : null;
}

/** `{cdn}/avatars/{user_id}/{avatar}.png|gif`, null without a hash. */
export function avatarUrl(cdnUrl: string, userId: string, avatar: string | null): string | null {
  return avatar ? `${cdnUrl}/avatars/${userId}/${avatar}.${ext(avatar)}` : null;
}

/** Nickname, else global name, else username. */
export function displayName(m: { nickname: string | null; global_name: string | null; username: string }): string {
  return m.nickname || m.global_name || m.username;
}

/** `username` when the discriminator is `0` (or empty), else `username#discriminator`. */
export function formattedUsername(m: { username: string; discriminator: string | null }): string {
  return !m.discriminator || m.discriminator === '0' ? m.username : `${m.username}#${m.discriminator}`;
}

/** Whether a communication timeout is in force at `now`. */
export function isTimedOut(until: Date | string | null, now = Date.now()): boolean {
  return until !== null && new Date(until).getTime() > now;
}

/** Snowflake ids are decimal digits. */
export const SNOWFLAKE = /^\d{1,25}$/;
