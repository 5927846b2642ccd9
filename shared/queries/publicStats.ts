import type { Knex } from 'knex';
import { COUNTER_SQL } from './counters';

/** GET /v1/stats/public (decisions.md): platform counts anyone may see. */
export interface PublicStats {
  users: number;
  devices: number;
  trips: { total: number; active: number };
  gps_points: number;
  geofences: number;
  guilds: number;
}

/**
 * The public counts in one statement. Users, devices, trips, GPS points and geofences are read from
 * the trigger-kept row counters (shared/queries/counters.ts): exact, and no table is scanned. Active
 * trips are counted through the (status, created_at) index; guilds are the chat guilds the bot has
 * synced (0 while the chat tables do not exist). Users exclude deleted accounts.
 */
export async function readPublicStats(db: Knex): Promise<PublicStats> {
  const { rows } = await db.raw(
    `SELECT
       ${COUNTER_SQL} AS users,
       ${COUNTER_SQL} AS devices,
       ${COUNTER_SQL} AS trips_total,
       (SELECT count(*) FROM trips WHERE status = 'active') AS trips_active,
       ${COUNTER_SQL} AS gps_points,
       ${COUNTER_SQL} AS geofences,
       to_regclass('chat_guilds') IS NOT NULL AS has_guilds`,
    ['users_live', 'devices', 'trips', 'gps_points', 'geofences'],
  );
  const r = rows[0];
  let guilds = 0;
  if (r.has_guilds) guilds = Number((await db.raw('SELECT count(*) AS n FROM chat_guilds')).rows[0].n);
  return {
    users: Number(r.users),
    devices: Number(r.devices),
    trips: { total: Number(r.trips_total), active: Number(r.trips_active) },
    gps_points: Number(r.gps_points),
    geofences: Number(r.geofences),
    guilds,
  };
}
