import type { Knex } from 'knex';

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
 * Up to this many GPS points are counted exactly (a scan bounded by LIMIT on the narrowest index);
 * beyond it the figure is PostgreSQL's planner estimate (pg_class.reltuples, kept by autovacuum's
 * ANALYZE), so a cache miss never scans a large gps_points table.
 */
export const GPS_EXACT_COUNT_LIMIT = 100_000;

/**
 * The public counts in one statement. Users exclude deleted accounts; guilds are the chat guilds the
 * bot has synced (0 while the chat tables do not exist); gps_points is exact up to
 * GPS_EXACT_COUNT_LIMIT and an estimate above it.
 */
export async function readPublicStats(db: Knex): Promise<PublicStats> {
  const { rows } = await db.raw(
    `SELECT
       (SELECT count(*) FROM users WHERE deleted_at IS NULL)::int AS users,
       (SELECT count(*) FROM devices)::int AS devices,
       (SELECT count(*) FROM trips)::int AS trips_total,
       (SELECT count(*) FROM trips WHERE status = 'active')::int AS trips_active,
       (SELECT count(*) FROM (SELECT 1 FROM gps_points LIMIT ?) bounded)::int AS gps_bounded,
       (SELECT greatest(reltuples, 0)::float8 FROM pg_class WHERE oid = 'gps_points'::regclass) AS gps_estimate,
       (SELECT count(*) FROM geofences)::int AS geofences,
       to_regclass('chat_guilds') IS NOT NULL AS has_guilds`,
    [GPS_EXACT_COUNT_LIMIT + 1],
  );
  const r = rows[0];
  const gps =
    r.gps_bounded > GPS_EXACT_COUNT_LIMIT ? Math.max(Math.round(r.gps_estimate), r.gps_bounded) : r.gps_bounded;
  let guilds = 0;
  if (r.has_guilds) guilds = Number((await db.raw('SELECT count(*)::int AS n FROM chat_guilds')).rows[0].n);
  return {
    users: r.users,
    devices: r.devices,
    trips: { total: r.trips_total, active: r.trips_active },
    gps_points: gps,
    geofences: r.geofences,
    guilds,
  };
}
