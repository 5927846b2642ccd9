import type { Knex } from 'knex';

/**
 * Counters that guard guessing (failed sign-ins per account and per IP, wrong 2FA codes per user)
 * live in PostgreSQL (shared/caches/loginThrottle.ts, twoFactorThrottle.ts). They were Redis keys
 * with a per-process fallback while Redis hung: the fallback started empty (a lock-out set in Redis
 * did not hold, and the right password got in while locked), allowed the limit again on each api
 * process, and was never written back. A row locked by the one statement that checks and counts is
 * atomic across every instance and outlives a Redis outage; sign-in already needs the database.
 *
 * A row: `count` attempts until `expires_at` (the window, from the first attempt counted); for 2FA
 * also `locked_until` (the cool-down) and `level` until `level_expires_at` (the doubling). The
 * scheduled cleanup deletes rows whose times have all passed.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw(`
    CREATE TABLE attempt_counters (
      key text PRIMARY KEY,
      count integer NOT NULL DEFAULT 0,
      expires_at timestamptz NOT NULL,
      locked_until timestamptz,
      level integer NOT NULL DEFAULT 0,
      level_expires_at timestamptz
    )`);
  await knex.raw(
    `CREATE INDEX attempt_counters_forgettable ON attempt_counters (greatest(expires_at, locked_until, level_expires_at))`,
  );
  // Checks every counter and, when none has reached its maximum, counts on every one: one
  // statement, the rows locked in key order (concurrent attempts on overlapping counters queue,
  // never deadlock). Returns 0, or the ms to wait (nothing counted).
  await knex.raw(`
    CREATE FUNCTION reserve_attempts(p_keys text[], p_max int[], p_window_ms bigint[]) RETURNS bigint
    LANGUAGE plpgsql AS $$
    DECLARE
      i int;
      r record;
      wait_ms bigint := 0;
      now_ts timestamptz;
    BEGIN
      INSERT INTO attempt_counters (key, count, expires_at)
        SELECT k, 0, clock_timestamp() FROM unnest(p_keys) k ORDER BY k
        ON CONFLICT (key) DO NOTHING;
      PERFORM 1 FROM attempt_counters WHERE key = ANY(p_keys) ORDER BY key FOR UPDATE;
      -- Read once the rows are held: an attempt that waited for them sees the times they were given.
      now_ts := clock_timestamp();
      FOR i IN 1 .. coalesce(array_length(p_keys, 1), 0) LOOP
        SELECT count, expires_at INTO r FROM attempt_counters WHERE key = p_keys[i];
        IF r.expires_at > now_ts AND r.count >= p_max[i] THEN
          wait_ms := greatest(wait_ms, ceil(extract(epoch FROM r.expires_at - now_ts) * 1000)::bigint);
        END IF;
      END LOOP;
      IF wait_ms > 0 THEN RETURN wait_ms; END IF;
      FOR i IN 1 .. coalesce(array_length(p_keys, 1), 0) LOOP
        UPDATE attempt_counters SET
          count = CASE WHEN expires_at > now_ts THEN count + 1 ELSE 1 END,
          expires_at = CASE WHEN expires_at > now_ts THEN expires_at
                            ELSE now_ts + p_window_ms[i] * interval '1 millisecond' END
        WHERE key = p_keys[i];
      END LOOP;
      RETURN 0;
    END $$`);
  // One 2FA code check: refused during a cool-down; the failure that reaches the maximum starts a
  // cool-down that doubles with the level (up to p_max_cooldown_ms) and clears the count.
  await knex.raw(`
    CREATE FUNCTION reserve_two_factor_attempt(
      p_key text, p_max int, p_window_ms bigint, p_base_ms bigint, p_max_cooldown_ms bigint, p_level_ms bigint
    ) RETURNS bigint
    LANGUAGE plpgsql AS $$
    DECLARE
      r record;
      c int;
      lvl int;
      ms bigint;
      now_ts timestamptz;
    BEGIN
      INSERT INTO attempt_counters (key, count, expires_at) VALUES (p_key, 0, clock_timestamp())
        ON CONFLICT (key) DO NOTHING;
      SELECT * INTO r FROM attempt_counters WHERE key = p_key FOR UPDATE;
      now_ts := clock_timestamp();
      IF r.locked_until > now_ts THEN
        RETURN ceil(extract(epoch FROM r.locked_until - now_ts) * 1000)::bigint;
      END IF;
      c := CASE WHEN r.expires_at > now_ts THEN r.count ELSE 0 END;
      IF c >= p_max THEN
        lvl := CASE WHEN r.level_expires_at > now_ts THEN r.level ELSE 0 END + 1;
        ms := least(p_base_ms * power(2, lvl - 1)::bigint, p_max_cooldown_ms);
        UPDATE attempt_counters SET count = 0, level = lvl,
          level_expires_at = now_ts + p_level_ms * interval '1 millisecond',
          locked_until = now_ts + ms * interval '1 millisecond'
        WHERE key = p_key;
        RETURN ms;
      END IF;
      UPDATE attempt_counters SET count = c + 1,
        expires_at = CASE WHEN c = 0 THEN now_ts + p_window_ms * interval '1 millisecond' ELSE expires_at END
      WHERE key = p_key;
      RETURN 0;
    END $$`);
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('DROP FUNCTION IF EXISTS reserve_two_factor_attempt(text, int, bigint, bigint, bigint, bigint)');
  await knex.raw('DROP FUNCTION IF EXISTS reserve_attempts(text[], int[], bigint[])');
  await knex.raw('DROP TABLE IF EXISTS attempt_counters');
}
