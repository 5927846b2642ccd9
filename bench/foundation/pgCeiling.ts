import pg from 'pg';

/**
 * Reference for benchmark (d): the same one-row SELECT straight through `pg` (pool of 10, 50
 * queries in flight, no HTTP), i.e. the most one process reads from Postgres here at one statement
 * per read. The api batches concurrent reads by id (shared/rowLoader.ts), which is how (d) can
 * exceed it.
 */
export async function pgCeiling(databaseUrl: string, seconds: number): Promise<number> {
  const pool = new pg.Pool({ connectionString: databaseUrl, max: 10 });
  let n = 0;
  const end = Date.now() + seconds * 1000;
  await Promise.all(
    Array.from({ length: 50 }, async () => {
      while (Date.now() < end) {
        await pool.query('SELECT * FROM roles WHERE id = $1', ['role_user']);
        n++;
      }
    }),
  );
  await pool.end();
  return n / seconds;
}

if (require.main === module) {
  const url = process.env.DATABASE_URL || 'postgres://postgres:postgres@127.0.0.1:5432/service_bench';
  pgCeiling(url, Number(process.env.DURATION ?? 6)).then((qps) =>
    process.stdout.write(`raw pg one-row SELECT: ${qps.toFixed(0)} queries/s\n`),
  );
}
