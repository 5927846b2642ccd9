import type { Config } from '../config';

/**
 * The stream platforms an integration can connect to (spec §4.25). One today: the Twitch-compatible
 * platform configured by STREAM_* (slug `stream`). A platform is listed even when it is not
 * configured, with `enabled: false`; connecting to it then answers 503.
 */

export interface PlatformScope {
  name: string;
  description: string;
  /** Always requested: the features of the integration need it. */
  required: boolean;
}

export interface IntegrationPlatform {
  slug: string;
  name: string;
  description: string;
  icon_url: string | null;
  features: string[];
  scopes: PlatformScope[];
}

export const STREAM_SLUG = 'stream';

const stream: IntegrationPlatform = {
  slug: STREAM_SLUG,
  name: 'Stream',
  description: 'Twitch-compatible live streaming platform: channel statistics and the stream bot',
  icon_url: null,
  features: ['oauth', 'channel_stats', 'stream_status', 'token_refresh', 'stream_bot'],
  scopes: [
    { name: 'user:read:email', description: "Read the account's email address", required: false },
    { name: 'moderator:read:followers', description: 'Read the followers of the channel', required: true },
    { name: 'channel:read:subscriptions', description: 'Read the subscribers of the channel', required: true },
    { name: 'chat:read', description: 'Read the chat of the channel (stream bot)', required: false },
    { name: 'chat:edit', description: 'Write to the chat of the channel (stream bot)', required: false },
    { name: 'channel:manage:broadcast', description: 'Change the title and category of the stream', required: false },
    { name: 'bits:read', description: 'Read Bits cheered in the channel', required: false },
  ],
};

export const INTEGRATION_PLATFORMS: readonly IntegrationPlatform[] = [stream];

/** The platform with this slug, or undefined. */
export function integrationPlatform(slug: string): IntegrationPlatform | undefined {
  return INTEGRATION_PLATFORMS.find((p) => p.slug === slug);
}

/** Whether the platform can be connected to on this deployment. */
export function platformEnabled(config: Pick<Config, 'stream'>, platform: IntegrationPlatform): boolean {
  return platform.slug === STREAM_SLUG && config.stream !== null;
}
