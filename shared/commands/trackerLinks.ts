import type { Knex } from 'knex';
import type { CredentialResolver } from '../auth/credentials';
import type { EventBus } from '../events';
import type { Logger } from '../logger';
import { invalidateCredentials } from './accessChanges';

/** What a command that moves tracker links needs: the database and the credential invalidation path. */
export interface TrackerLinkServices {
  db: Knex;
  bus: EventBus;
  logger: Logger;
  credentials?: CredentialResolver;
}

/**
 * Drops the cached links of these keys with their credentials (a link is cached per credential,
 * shared/caches/trackerLinks.ts): at once in this process and on every other api instance. Run
 * after the commit.
 */
export async function invalidateTrackerLinks(
  services: TrackerLinkServices,
  apiKeyIds: Array<string | null | undefined>,
): Promise<void> {
  const ids = [...new Set(apiKeyIds.filter((k): k is string => typeof k === 'string'))];
  if (ids.length) await invalidateCredentials(services, { apiKeyIds: ids });
}
