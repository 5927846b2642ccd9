import type { Knex } from 'knex';
import { OAUTH_CLIENT_SECRET_PREFIX } from '../auth/oauthTokens';
import { attributed, Attribution, AuditInput, recordAuditEvent } from '../audit';
import { randomToken, sha256 } from '../crypto';
import { afterCommit, transaction } from '../db';
import { badRequest, notFound } from '../errors';
import type { AuthInvalidation } from '../events';
import { OAuthClient } from '../models/OAuthClient';
import { clientTokenInvalidation } from '../queries/oauth';
import { AccessServices, invalidateCredentials } from './accessChanges';
import { deleteById, insertRow, patchLoaded } from '../models/AppModel';

/**
 * OAuth client applications (spec §4.19). Who may act on a client is decided by the caller through
 * shared/policies (subjects.oauthClient); these commands make the change, audit it and drop the
 * cached credentials of the client's live tokens when it narrows what they allow.
 */

/** The fields a client's owner (or an administrator) sets. */
export interface OAuthClientFields {
  name: string;
  description: string | null;
  logo_url: string | null;
  homepage_url: string | null;
  privacy_policy_url: string | null;
  terms_of_service_url: string | null;
  redirect_uris: string[];
  allowed_scopes: string[];
  client_type: 'public' | 'confidential';
  is_first_party: boolean;
}

/** A client audit event, for its owner (or, for an ownerless client, whoever acted). */
function clientEvent(
  by: Attribution,
  client: OAuthClient,
  eventType: string,
  metadata: Record<string, unknown> = {},
): AuditInput {
  return attributed(by, {
    user_id: client.user_id ?? by.actorId,
    event_type: eventType,
    resource_type: 'oauth_client',
    resource_id: client.id,
    metadata: { name: client.name, ...metadata },
  });
}

/** Drops the cached credentials named, if any (after a commit). */
async function invalidateTokens(services: AccessServices, msg: AuthInvalidation | null): Promise<void> {
  if (msg) await invalidateCredentials(services, msg);
}

/**
 * Registers a client owned by `ownerId`; a confidential client gets a secret, returned here only
 * (null for a public client).
 */
export async function registerOAuthClient(
  db: Knex,
  ownerId: string | null,
  fields: OAuthClientFields,
  by: Attribution,
): Promise<{ client: OAuthClient; secret: string | null }> {
  const secret = fields.client_type === 'confidential' ? randomToken(OAUTH_CLIENT_SECRET_PREFIX, 32) : null;
  const client = await transaction(db, async (trx) => {
    const c = await insertRow(OAuthClient, trx, {
      user_id: ownerId,
      ...fields,
      is_active: true,
      client_secret_hash: secret ? sha256(secret) : null,
    });
    const { client_type, redirect_uris, allowed_scopes } = c;
    await recordAuditEvent(clientEvent(by, c, 'client_created', { client_type, redirect_uris, allowed_scopes }), trx);
    return c;
  });
  return { client, secret };
}

/**
 * Updates a client. A public client cannot become confidential (400); a confidential one turned
 * public loses its secret. Deactivating it or changing its scopes reaches its live tokens at once:
 * the allowed scopes are a ceiling over the stored grants, applied where a token is read or issued.
 */
export async function updateOAuthClient(
  services: AccessServices,
  client: OAuthClient,
  changes: Partial<OAuthClientFields> & { is_active?: boolean },
  by: Attribution,
): Promise<OAuthClient> {
  if (changes.client_type === 'confidential' && client.client_type === 'public') {
    throw badRequest('client_type: a public client cannot become confidential; register a new client');
  }
  const patch: Partial<OAuthClient> = Object.fromEntries(Object.entries(changes).filter(([, v]) => v !== undefined));
  const fields = Object.keys(patch);
  if (changes.client_type === 'public') patch.client_secret_hash = null;
  return transaction(services.db, async (trx) => {
    const c = await patchLoaded(client, trx, patch, 'oauth client');
    await recordAuditEvent(clientEvent(by, c, 'client_updated', { fields }), trx);
    if (changes.is_active !== undefined || changes.allowed_scopes !== undefined) {
      afterCommit(trx, async () => invalidateTokens(services, await clientTokenInvalidation(services.db, client.id)));
    }
    return c;
  });
}

/** Gives a confidential client a new secret (400 for a public client); the old one stops working. */
export async function regenerateClientSecret(db: Knex, client: OAuthClient, by: Attribution): Promise<string> {
  if (client.client_type !== 'confidential') throw badRequest('public clients have no client secret');
  const secret = randomToken(OAUTH_CLIENT_SECRET_PREFIX, 32);
  await transaction(db, async (trx) => {
    // Deleted since the route loaded it: 404, not a secret for a client that is gone.
    await patchLoaded(client, trx, { client_secret_hash: sha256(secret) }, 'oauth client');
    await recordAuditEvent(clientEvent(by, client, 'client_secret_regenerated'), trx);
  });
  return secret;
}

/** Deletes a client with its tokens and consents; its users' cached credentials are dropped. */
export async function deleteOAuthClient(services: AccessServices, client: OAuthClient, by: Attribution): Promise<void> {
  await transaction(services.db, async (trx) => {
    // Read before the delete: the tokens go with the client.
    const invalidations = await clientTokenInvalidation(trx, client.id);
    afterCommit(trx, () => invalidateTokens(services, invalidations));
    // Of concurrent deletes one deletes (and records the event); the others answer 404.
    if ((await deleteById(OAuthClient, trx, client.id)) === 0) throw notFound('oauth client');
    await recordAuditEvent(clientEvent(by, client, 'client_deleted'), trx);
  });
}
