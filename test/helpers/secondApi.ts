import { Model } from 'objection';
import { startApi } from '../../api/server';
import type { Config } from '../../shared/config';
import type { Stack } from './stack';

/**
 * A second api instance on the same database and Redis prefix as the stack (as in a PM2 cluster),
 * with the stack's config or `config` changes to it (a short DRAIN_TIMEOUT_MS, say).
 * Starting an api binds Objection's models to its knex; closing it rebinds them to the stack's,
 * so tests using it should be serial.
 */
export async function startSecondApi(
  s: Stack,
  config: Partial<Config> = {},
): Promise<{ url: string; close(): Promise<void> }> {
  const api = await startApi({ ...s.config, ...config }, { port: 0, drainIdleGraceMs: 0 });
  Model.knex(s.db);
  return {
    url: `http://127.0.0.1:${api.port}`,
    async close() {
      await api.close();
      Model.knex(s.db);
    },
  };
}
