import type { Knex } from 'knex';
import { Integration } from '../models/Integration';
import { rowsBy } from '../rowLoader';

/** A user's integrations, oldest connection first; concurrent requests share one statement per turn. */
export function integrationsOf(db: Knex): { load(userId: string): Promise<Integration[]> } {
  return rowsBy(Integration, 'user_id', [['connected_at', 'asc']], db);
}
