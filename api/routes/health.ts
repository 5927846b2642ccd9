import Router from '@koa/router';
import { aisStatus, AisHealth } from '../../shared/caches/aisStatus';
import { redisKey, RedisKeys } from '../../shared/redis';
import { z } from '../../shared/zod';
import { defineRoute, AppState } from '../routing';
import type { ApiServices } from '../services';

/** A realtime instance's report is current when younger than this. */
const WS_STATS_FRESH_MS = 15_000;

async function timed<T>(
  probe: () => Promise<T>,
  timeoutMs = 2000,
): Promise<{ status: 'ok' | 'down'; responseTime: number }> {
  const start = process.hrtime.bigint();
  try {
    await Promise.race([
      probe(),
      new Promise((_, rej) => setTimeout(() => rej(new Error('timeout')), timeoutMs).unref()),
    ]);
    return { status: 'ok', responseTime: Number(process.hrtime.bigint() - start) / 1e6 };
  } catch {
    return { status: 'down', responseTime: Number(process.hrtime.bigint() - start) / 1e6 };
  }
}

/** Sums the connection and subscription counts that live realtime instances report in Redis. */
async function websocketStats(
  s: ApiServices,
): Promise<{ status: 'ok' | 'down'; connections: number; subscriptions: number; instances: number }> {
  try {
    const all = await Promise.race([
      s.redis.hgetall(redisKey(s.config, RedisKeys.wsStats)),
      new Promise<never>((_, rej) => setTimeout(() => rej(new Error('timeout')), 2000).unref()),
    ]);
    let connections = 0;
    let subscriptions = 0;
    let instances = 0;
    for (const raw of Object.values(all)) {
      const r = JSON.parse(raw) as { connections: number; subscriptions: number; at: number };
      if (Date.now() - r.at > WS_STATS_FRESH_MS) continue;
      connections += r.connections;
      subscriptions += r.subscriptions;
      instances++;
    }
    return { status: instances > 0 ? 'ok' : 'down', connections, subscriptions, instances };
  } catch {
    return { status: 'down', connections: 0, subscriptions: 0, instances: 0 };
  }
}

/** AIS ingestion counters (null when AIS_FEED_URL is not set); a slow Redis answers zeros. */
async function aisHealth(s: ApiServices): Promise<(AisHealth & { configured: true }) | { configured: false }> {
  if (!s.config.aisFeedUrl) return { configured: false };
  const none = { connected: false, sentences: 0, errors: 0, vessels: 0 };
  const status = await Promise.race([
    aisStatus(s.redis, s.config).catch(() => none),
    new Promise<AisHealth>((r) => setTimeout(() => r(none), 2000).unref()),
  ]);
  return { configured: true, ...status };
}
const probe = z.object({ status: z.enum(['ok', 'down']), responseTime: z.number() });
/** Uptime split into parts, with the total in seconds. */
export const uptimeSchema = z
  .object({
    days: z.number().int(),
    hours: z.number().int(),
    minutes: z.number().int(),
    seconds: z.number().int(),
    total: z.number(),
  })
  .openapi('Uptime');
const healthSchema = z
  .object({
    status: z.enum(['ok', 'degraded', 'unhealthy']),
    version: z.string(),
    timestamp: z.string().datetime(),
    uptime: uptimeSchema,
    services: z.object({
      database: probe,
      cache: probe,
      websocket: z.object({
        status: z.enum(['ok', 'down']),
        connections: z.number().int(),
        subscriptions: z.number().int(),
      }),
      ais: z.object({
        configured: z.boolean(),
        connected: z.boolean().optional(),
        sentences: z.number().int().optional(),
        errors: z.number().int().optional(),
        vessels: z.number().int().optional(),
      }),
    }),
    _links: z.object({ self: z.string(), info: z.string(), openapi: z.string() }),
  })
  .openapi('Health');

export function uptimeParts(startedAt: number) {
  const total = (Date.now() - startedAt) / 1000;
  const whole = Math.floor(total);
  return {
    days: Math.floor(whole / 86400),
    hours: Math.floor((whole % 86400) / 3600),
    minutes: Math.floor((whole % 3600) / 60),
    seconds: whole % 60,
    total,
  };
}

async function runProbes(s: ApiServices) {
  const [database, cache, websocket, ais] = await Promise.all([
    timed(() => s.db.raw('select 1')),
    timed(() => s.redis.ping()),
    websocketStats(s),
    aisHealth(s),
  ]);
  return { database, cache, websocket, ais };
}

/**
 * The probes, shared by the health requests that arrive in one turn of the event loop: they are
 * started once that turn's requests are in (setImmediate), so every answer still reflects probes
 * begun after its request arrived, but a load balancer polling many times a second costs one
 * `select 1` and one PING per turn, not per request.
 */
const probeRuns = new WeakMap<ApiServices, () => ReturnType<typeof runProbes>>();
export function probesFor(s: ApiServices): () => ReturnType<typeof runProbes> {
  let run = probeRuns.get(s);
  if (!run) {
    let next: ReturnType<typeof runProbes> | null = null;
    run = () =>
      (next ??= new Promise((resolve) =>
        setImmediate(() => {
          next = null;
          resolve(runProbes(s));
        }),
      ));
    probeRuns.set(s, run);
  }
  return run;
}

/** GET /health and /v1/health: real probes of Postgres and Redis, realtime counts, uptime. */
export function healthRoutes(router: Router<AppState, { services: ApiServices }>): void {
  for (const path of ['/health', '/v1/health']) {
    defineRoute(
      router,
      {
        method: 'get',
        path,
        summary: 'Service health',
        tags: ['health'],
        auth: 'public',
        responses: {
          200: { description: 'Healthy', schema: healthSchema },
          503: { description: 'Database or cache down', schema: healthSchema },
        },
      },
      async (ctx) => {
        const s = ctx.services;
        const { database, cache, websocket, ais } = await probesFor(s)();
        const healthy = database.status === 'ok' && cache.status === 'ok';
        ctx.status = healthy ? 200 : 503;
        ctx.body = {
          status: healthy ? (websocket.status === 'ok' ? 'ok' : 'degraded') : 'unhealthy',
          version: s.version,
          timestamp: new Date().toISOString(),
          uptime: uptimeParts(s.startedAt),
          services: {
            database,
            cache,
            websocket: {
              status: websocket.status,
              connections: websocket.connections,
              subscriptions: websocket.subscriptions,
            },
            ais,
          },
          // One body on both paths (spec §4.1): /v1/health is the canonical address of either.
          _links: { self: '/v1/health', info: '/v1', openapi: '/v1/openapi.json' },
        };
      },
    );
  }
}
