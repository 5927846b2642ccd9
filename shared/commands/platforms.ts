import type { Attribution } from '../audit';
import type { ServiceContext } from '../context';
import { Platform } from '../models/Platform';
import { patchLoaded } from '../models/AppModel';

/**
 * Switches sign-in through a platform on or off: a disabled platform refuses new sign-ins and
 * registrations through it. The switch is logged with who made it.
 */
export async function setPlatformEnabled(
  ctx: Pick<ServiceContext, 'db' | 'logger'>,
  platform: Platform,
  enabled: boolean,
  by: Attribution,
): Promise<Platform> {
  const updated = await patchLoaded(platform, ctx.db, { enabled }, 'platform');
  ctx.logger.info({ platform: platform.slug, enabled, by: by.actorId }, 'platform sign-in toggled');
  return updated;
}
