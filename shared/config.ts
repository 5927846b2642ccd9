import { isIP } from 'node:net';
import { availableParallelism } from 'node:os';
import { z } from 'zod';
import { QueueName } from './queueNames';

/** argon2id's cost: memory in KiB, passes over it, lanes (PASSWORD_HASH_*). */
export interface PasswordHashing {
  memoryCost: number;
  timeCost: number;
  parallelism: number;
}

/** argon2's defaults (64 MiB, 3 passes, 4 lanes): above every argon2id configuration OWASP recommends. */
export const DEFAULT_PASSWORD_HASHING: PasswordHashing = { memoryCost: 65536, timeCost: 3, parallelism: 4 };

/** The least memory production accepts: OWASP's smallest argon2id configuration is 19 MiB with 2 passes. */
const PRODUCTION_MIN_HASH_MEMORY_KIB = 19456;

/**
 * The one typed view of the environment. Every process calls `loadConfig(process.env)` once at
 * start; a bad or missing value throws a ConfigError naming the variable, and the entry point exits.
 * Tests build a Config with `loadConfig({...overrides})` so nothing reads process.env behind their back.
 */

const int = (def: number, min = 0, max = Number.MAX_SAFE_INTEGER) =>
  z
    .string()
    .optional()
    .transform((v, ctx) => {
      if (v === undefined || v === '') return def;
      const n = Number(v);
      if (!Number.isInteger(n) || n < min || n > max) {
        const range = max === Number.MAX_SAFE_INTEGER ? `>= ${min}` : `from ${min} to ${max}`;
        ctx.addIssue({ code: z.ZodIssueCode.custom, message: `must be an integer ${range}` });
        return z.NEVER;
      }
      return n;
    });

/** A TCP port (0: any free one, for tests). */
const port = (def: number) => int(def, 0, 65535);

/**
 * A URL of one of `schemes` (`postgres:`…), or undefined when unset. A URL of another scheme is
 * refused here: `REDIS_URL=http://…` was accepted, and the service then ran with Redis forever
 * "down"; `DATABASE_URL=mysql://…` stopped it with a driver error that did not name the variable.
 */
const urlOf = (schemes: string[]) =>
  z
    .string()
    .optional()
    .transform((v, ctx) => {
      if (v === undefined || v === '') return undefined;
      const message = `must be a ${schemes.map((s) => `${s}//`).join(' or ')} URL`;
      if (!URL.canParse(v) || !schemes.includes(new URL(v).protocol)) {
        ctx.addIssue({ code: z.ZodIssueCode.custom, message });
        return z.NEVER;
      }
      return v;
    });
const optionalUrl = urlOf(['http:', 'https:']);
const withDefault = <T extends z.ZodTypeAny>(schema: T, def: string) =>
  schema.transform((v: string | undefined) => v ?? def);

/** An address to listen on: an IP address or a host name (checked here, not by a failing listen()). */
const host = (def: string) =>
  z
    .string()
    .default(def)
    .refine(
      (v) =>
        isIP(v) !== 0 ||
        /^(?=.{1,253}$)[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)*$/.test(
          v,
        ),
      {
        message: 'must be an IP address or a host name',
      },
    );

/** A mailbox as a From header takes it: `Name <user@host>` or `user@host`. */
const MAILBOX = /^(?:[^<>@]*<[^<>\s@]+@[^<>\s@]+>|[^<>\s@]+@[^<>\s@]+)$/;

/** A locale tag as SUPPORTED_LOCALES and the `auth.supported_locales` setting take it: en, pt-BR. */
export const LOCALE_TAG = /^[a-z]{2,3}(-[A-Za-z0-9]{2,8})*$/;

/** Base64, standard or URL-safe, padded or not (Node decodes all four), and nothing else. */
const BASE64 = /^(?:[A-Za-z0-9+/]+|[A-Za-z0-9_-]+)={0,2}$/;

const secretsKey = z
  .string()
  .optional()
  .transform((v, ctx) => {
    // A fixed development key keeps local runs working; production sets its own (NODE_ENV check below).
    const raw = v && v !== '' ? v : 'ZGV2ZWxvcG1lbnQtb25seS1rZXktMzItYnl0ZXMhISE=';
    const key = Buffer.from(raw, 'base64');
    // Node's decoder skips characters that are not base64: `!!!!<key>` would pass as <key>.
    if (!BASE64.test(raw) || key.length !== 32) {
      ctx.addIssue({ code: z.ZodIssueCode.custom, message: 'must be 32 bytes, base64-encoded' });
      return z.NEVER;
    }
    return key;
  });

/** Earlier SECRETS_KEY values (comma-separated, base64), kept only to decrypt during a rotation. */
const previousSecretsKeys = z
  .string()
  .default('')
  .transform((v, ctx) => {
    const keys = v
      .split(',')
      .map((s) => s.trim())
      .filter(Boolean);
    if (keys.some((k) => !BASE64.test(k) || Buffer.from(k, 'base64').length !== 32)) {
      ctx.addIssue({ code: z.ZodIssueCode.custom, message: 'each key must be 32 bytes, base64-encoded' });
      return z.NEVER;
    }
    return keys.map((k) => Buffer.from(k, 'base64'));
  });

/** ID_APPS: comma-separated `app_id:secret` pairs of first-party apps allowed to send X-ID-App-Assertion. */
const idApps = z
  .string()
  .optional()
  .transform((v, ctx) => {
    const apps = new Map<string, string>();
    if (!v) return apps;
    for (const pair of v
      .split(',')
      .map((s) => s.trim())
      .filter(Boolean)) {
      const i = pair.indexOf(':');
      if (i <= 0 || i === pair.length - 1) {
        ctx.addIssue({ code: z.ZodIssueCode.custom, message: 'must be a comma-separated list of app_id:secret' });
        return z.NEVER;
      }
      apps.set(pair.slice(0, i), pair.slice(i + 1));
    }
    return apps;
  });

/** QUEUE_CONCURRENCY: comma-separated `queue:n` pairs overriding WORKER_CONCURRENCY per queue. */
const queueConcurrency = z
  .string()
  .optional()
  .transform((v, ctx) => {
    const out: Record<string, number> = {};
    for (const pair of (v ?? '')
      .split(',')
      .map((s) => s.trim())
      .filter(Boolean)) {
      const m = /^([A-Za-z]+):(\d+)$/.exec(pair);
      if (!m || Number(m[2]) < 1) {
        ctx.addIssue({ code: z.ZodIssueCode.custom, message: 'must be a comma-separated list of queue:n (n >= 1)' });
        return z.NEVER;
      }
      if (!(Object.values(QueueName) as string[]).includes(m[1])) {
        ctx.addIssue({
          code: z.ZodIssueCode.custom,
          message: `names no queue: ${m[1]} (queues: ${Object.values(QueueName).join(', ')})`,
        });
        return z.NEVER;
      }
      out[m[1]] = Number(m[2]);
    }
    return out;
  });

const schema = z.object({
  NODE_ENV: z.enum(['development', 'production', 'test']).default('development'),
  PORT: port(3000),
  HOST: host('0.0.0.0'),
  // false, true (one proxy), or how many proxies in front append to X-Forwarded-For.
  TRUST_PROXY: z
    .string()
    .default('false')
    .transform((v, ctx) => {
      if (v === 'false' || v === '') return 0;
      if (v === 'true') return 1;
      const n = Number(v);
      if (/^\d+$/.test(v) && n <= 10) return n;
      ctx.addIssue({ code: z.ZodIssueCode.custom, message: 'must be true, false or a number of proxies from 0 to 10' });
      return z.NEVER;
    }),
  REALTIME_PORT: port(0),
  REALTIME_HOST: host('127.0.0.1'),
  DATABASE_URL: withDefault(urlOf(['postgres:', 'postgresql:']), 'postgres://postgres:postgres@127.0.0.1:5432/service'),
  DATABASE_POOL_MAX: int(10, 1),
  DATABASE_REQUEST_TIMEOUT_MS: int(10_000, 100),
  HTTP_REQUEST_TIMEOUT_MS: int(30_000, 100),
  REDIS_URL: withDefault(urlOf(['redis:', 'rediss:']), 'redis://127.0.0.1:6379'),
  REDIS_PREFIX: z.string().default('svc:'),
  // An environment variable, not request text (zChars is for those): a secret's length in any unit.
  // eslint-disable-next-line no-restricted-syntax
  SYSTEM_API_KEY: z.string().min(16).optional(),
  SECRETS_KEY: secretsKey,
  SECRETS_KEY_PREVIOUS: previousSecretsKeys,
  INTERNAL_TOKEN: z.string().default(''),
  ID_APPS: idApps,
  ID_ASSERTION_MAX_AGE_SECONDS: int(30, 1),
  ID_ASSERTION_CLOCK_SKEW_SECONDS: int(5, 0),
  SMTP_URL: urlOf(['smtp:', 'smtps:']),
  MAIL_FROM: z
    .string()
    .default('Service <no-reply@localhost>')
    .refine((v) => MAILBOX.test(v.trim()), { message: 'must be an address: Name <user@host> or user@host' }),
  APP_URL: optionalUrl,
  EMAIL_RETRY_DELAY_MS: int(2000, 1),
  EMAIL_RETRY_MAX_DELAY_MS: int(300_000, 1),
  PEGEL_API_URL: optionalUrl,
  AIS_FEED_URL: urlOf(['tcp:', 'udp:']).refine((v) => v === undefined || /^(tcp|udp):\/\/[^/:]*:\d+\/?$/.test(v), {
    message: 'must be tcp://host:port or udp://host:port',
  }),
  AIS_VESSEL_TTL_SECONDS: int(600, 1),
  AIS_LEASE_MS: int(5000, 500),
  CHROMIUM_PATH: z.string().default('/usr/bin/chromium'),
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  SUPPORTED_LOCALES: z
    .string()
    .default('en,de')
    .refine(
      (v) => v.split(',').some((l) => l.trim()) && v.split(',').every((l) => !l.trim() || LOCALE_TAG.test(l.trim())),
      'must be a comma-separated list of locale tags like en or pt-BR',
    ),
  // argon2id's cost (shared/domain/passwords.ts); the bounds are argon2's (memory ≥ 8 KiB per lane),
  // capped so that a typo cannot ask 1 TiB of one request.
  PASSWORD_HASH_MEMORY_KIB: int(DEFAULT_PASSWORD_HASHING.memoryCost, 8, 4 * 1024 * 1024),
  PASSWORD_HASH_TIME_COST: int(DEFAULT_PASSWORD_HASHING.timeCost, 1, 100),
  PASSWORD_HASH_PARALLELISM: int(DEFAULT_PASSWORD_HASHING.parallelism, 1, 64),
  WORKER_CONCURRENCY: int(4, 1),
  QUEUE_CONCURRENCY: queueConcurrency,
  DRAIN_TIMEOUT_MS: int(10000, 0),
  API_INSTANCES: z
    .string()
    .default('max')
    .refine((v) => v === 'max' || /^-?\d+$/.test(v), { message: 'must be max or an integer (PM2 instances)' }),
  REALTIME_INSTANCES: int(1, 1),
  WORKER_INSTANCES: int(1, 1),
  WS_HEARTBEAT_INTERVAL_MS: int(5000, 10),
  WS_HEARTBEAT_TIMEOUT_MS: int(10000, 10),
  WS_TICKET_TTL_SECONDS: int(30, 1),
  WS_MAX_BUFFERED_BYTES: int(1024 * 1024, 1024),
  WS_MAX_MESSAGES_PER_10S: int(100, 1),
  RATE_LIMIT_WINDOW_SECONDS: int(60, 1),
  RATE_LIMIT_ANONYMOUS: int(120, 1),
  RATE_LIMIT_ANONYMOUS_WINDOW_SECONDS: int(0, 0),
  RATE_LIMIT_USER: int(600, 1),
  RATE_LIMIT_USER_WINDOW_SECONDS: int(0, 0),
  RATE_LIMIT_API_KEY: int(1200, 1),
  RATE_LIMIT_API_KEY_WINDOW_SECONDS: int(0, 0),
  RATE_LIMIT_GPS_POST: int(30, 1),
  RATE_LIMIT_GPS_POST_WINDOW_SECONDS: int(60, 1),
  RATE_LIMIT_REGISTER: int(30, 1),
  RATE_LIMIT_REGISTER_WINDOW_SECONDS: int(900, 1),
  EXPORT_RATE_LIMIT_PER_HOUR: int(5, 1),
  EXPORT_TIMEOUT_MS: int(60000, 1),
  EXPORT_PDF_MAX_PAGES: int(2, 1),
  EXPORT_ARCHIVE_TTL_SECONDS: int(300, 1),
  STREAM_AUTH_URL: optionalUrl,
  STREAM_API_URL: optionalUrl,
  STREAM_CLIENT_ID: z.string().optional(),
  STREAM_CLIENT_SECRET: z.string().optional(),
  STREAM_TIMEOUT_MS: int(5000, 1),
  STREAM_REFRESH_AHEAD_SECONDS: int(900, 0),
  CHAT_SYNC_TIMEOUT_SECONDS: int(30, 1),
  CHAT_MEMBER_SYNC_TIMEOUT_SECONDS: int(60, 1),
  CHAT_CDN_URL: withDefault(optionalUrl, 'https://cdn.discordapp.com'),
});

export interface RateTier {
  limit: number;
  windowSeconds: number;
}

export interface Config {
  env: 'development' | 'production' | 'test';
  port: number;
  host: string;
  /**
   * Proxies in front of the api that append the address they saw to X-Forwarded-For (0: the header
   * is ignored). The client's address is the entry that many places from the end: entries further
   * left were written by the client itself.
   */
  trustProxyHops: number;
  /** Internal port of the realtime process; the api forwards /v1/ws upgrades there. */
  realtimePort: number;
  /** Bind address of the realtime process: loopback unless a reverse proxy reaches it directly. */
  realtimeHost: string;
  databaseUrl: string;
  databasePoolMax: number;
  /**
   * The api's and realtime's bound on one statement and on the wait for a pooled connection: a
   * PostgreSQL that stops answering with its connections open is a 503 after this long, not a hang.
   */
  databaseRequestTimeoutMs: number;
  /** Longest a client may take to send its whole request (its headers: a third of it, at most 10 s). */
  httpRequestTimeoutMs: number;
  redisUrl: string;
  redisPrefix: string;
  systemApiKey?: string;
  secretsKey: Buffer;
  /** SECRETS_KEY first, then SECRETS_KEY_PREVIOUS: the ring secrets are decrypted with (the first encrypts). */
  secretKeys: Buffer[];
  internalToken: string;
  idApps: Map<string, string>;
  idAssertionMaxAgeSeconds: number;
  idAssertionClockSkewSeconds: number;
  smtpUrl?: string;
  mailFrom: string;
  /** Base of the links in emails: APP_URL, else the API's own origin (`http://localhost:PORT`). */
  appUrl: string;
  /** Whether APP_URL was set: a web app of its own may then serve the links (api/routes/emailPages.ts). */
  appUrlSet: boolean;
  /**
   * Retries of a mail whose delivery failed for a transient reason: the first after delayMs, each
   * next one twice as late, at most maxDelayMs apart, until delivered or the row's deliver_until.
   */
  emailRetry: { delayMs: number; maxDelayMs: number };
  pegelApiUrl?: string;
  aisFeedUrl?: string;
  /** AIS: a vessel not heard for this long is dropped from the state and from /health counts. */
  aisVesselTtlSeconds: number;
  /** AIS: lease of the one feed consumer; a dead holder is replaced within about this long. */
  aisLeaseMs: number;
  chromiumPath: string;
  logLevel: string;
  supportedLocales: string[];
  workerConcurrency: number;
  /** Per-queue concurrency overrides (QUEUE_CONCURRENCY); other queues use workerConcurrency. */
  queueConcurrency: Record<string, number>;
  /** api: how long a SIGTERM drain waits for requests in flight before cutting them (below PM2's kill_timeout). */
  drainTimeoutMs: number;
  instances: { api: string; realtime: number; workers: number };
  ws: {
    heartbeatIntervalMs: number;
    heartbeatTimeoutMs: number;
    ticketTtlSeconds: number;
    maxBufferedBytes: number;
    maxMessagesPer10s: number;
  };
  rateLimit: {
    anonymous: RateTier;
    user: RateTier;
    apiKey: RateTier;
    gpsPost: RateTier;
    /** POST /v1/auth/register per client IP, counted in PostgreSQL before the password is hashed. */
    register: RateTier;
  };
  /** Personal data export (GET /v1/user/export, docs/data-export.md). */
  dataExport: {
    /** Exports one user may ask for per hour (fixed window, counted in Redis). */
    rateLimitPerHour: number;
    /** How long a request waits for the worker before answering 503. */
    timeoutMs: number;
    /** Chromium pages one worker process renders at once (one browser per process). */
    pdfMaxPages: number;
    /** Lifetime of a finished archive in Redis when no request downloads it. */
    archiveTtlSeconds: number;
  };
  /** The Twitch-compatible stream platform (spec §4.25); null until all four STREAM_* values are set. */
  stream: StreamConfig | null;
  /** Longest wait for one call to the stream platform (STREAM_TIMEOUT_MS). */
  streamTimeoutMs: number;
  /** The scheduled refresh renews tokens expiring within this many seconds (STREAM_REFRESH_AHEAD_SECONDS). */
  streamRefreshAheadSeconds: number;
  /** Chat bot (spec §4.23, §8): how long a sync waits for the bot, and the CDN of icons and avatars. */
  chat: { syncTimeoutMs: number; memberSyncTimeoutMs: number; cdnUrl: string };
  /** argon2id cost of the password hashes this process writes (PASSWORD_HASH_*). */
  passwordHashing: PasswordHashing;
}

export interface StreamConfig {
  /** OAuth base: `/authorize`, `/token`, `/revoke`, `/validate` below it. */
  authUrl: string;
  /** Helix-style API base: `/users`, `/streams`, `/channels/followers`, `/subscriptions` below it. */
  apiUrl: string;
  clientId: string;
  clientSecret: string;
}

export class ConfigError extends Error {}

/** Reads and validates the environment; throws ConfigError naming every bad variable. */
export function loadConfig(env: Record<string, string | undefined> = process.env): Config {
  const parsed = schema.safeParse(env);
  if (!parsed.success) {
    const lines = parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`);
    throw new ConfigError(`Invalid configuration:\n  ${lines.join('\n  ')}`);
  }
  const e = parsed.data;
  if (e.NODE_ENV === 'production' && !env.SECRETS_KEY) {
    throw new ConfigError('Invalid configuration:\n  SECRETS_KEY: required in production (32 bytes, base64)');
  }
  if (e.PASSWORD_HASH_MEMORY_KIB < 8 * e.PASSWORD_HASH_PARALLELISM)
    throw new ConfigError(
      'Invalid configuration:\n  PASSWORD_HASH_MEMORY_KIB: must be at least 8 KiB per lane (8 × PASSWORD_HASH_PARALLELISM)',
    );
  // Cheaper hashes are for tests and development only: production keeps at least OWASP's smallest
  // argon2id configuration (19 MiB, 2 passes).
  if (
    e.NODE_ENV === 'production' &&
    (e.PASSWORD_HASH_MEMORY_KIB < PRODUCTION_MIN_HASH_MEMORY_KIB || e.PASSWORD_HASH_TIME_COST < 2)
  )
    throw new ConfigError(
      `Invalid configuration:\n  PASSWORD_HASH_MEMORY_KIB / PASSWORD_HASH_TIME_COST: production needs at least ${PRODUCTION_MIN_HASH_MEMORY_KIB} KiB and 2 passes (OWASP's smallest argon2id setting)`,
    );
  if (e.REALTIME_PORT && e.REALTIME_PORT === e.PORT)
    throw new ConfigError(
      'Invalid configuration:\n  REALTIME_PORT: must differ from PORT (the api listens there; realtime needs its own port)',
    );
  if (!e.REALTIME_PORT && e.PORT === 65535)
    throw new ConfigError(
      'Invalid configuration:\n  PORT: 65535 leaves no port for realtime (PORT + 1): set REALTIME_PORT',
    );
  const window = e.RATE_LIMIT_WINDOW_SECONDS;
  return {
    env: e.NODE_ENV,
    port: e.PORT,
    host: e.HOST,
    trustProxyHops: e.TRUST_PROXY,
    realtimePort: e.REALTIME_PORT || e.PORT + 1,
    realtimeHost: e.REALTIME_HOST,
    databaseUrl: e.DATABASE_URL,
    databasePoolMax: e.DATABASE_POOL_MAX,
    databaseRequestTimeoutMs: e.DATABASE_REQUEST_TIMEOUT_MS,
    httpRequestTimeoutMs: e.HTTP_REQUEST_TIMEOUT_MS,
    redisUrl: e.REDIS_URL,
    redisPrefix: e.REDIS_PREFIX,
    systemApiKey: e.SYSTEM_API_KEY,
    secretsKey: e.SECRETS_KEY,
    secretKeys: [e.SECRETS_KEY, ...e.SECRETS_KEY_PREVIOUS],
    internalToken: e.INTERNAL_TOKEN,
    idApps: e.ID_APPS,
    idAssertionMaxAgeSeconds: e.ID_ASSERTION_MAX_AGE_SECONDS,
    idAssertionClockSkewSeconds: e.ID_ASSERTION_CLOCK_SKEW_SECONDS,
    smtpUrl: e.SMTP_URL,
    mailFrom: e.MAIL_FROM,
    appUrl: e.APP_URL ?? `http://localhost:${e.PORT || 3000}`,
    appUrlSet: e.APP_URL !== undefined,
    emailRetry: { delayMs: e.EMAIL_RETRY_DELAY_MS, maxDelayMs: e.EMAIL_RETRY_MAX_DELAY_MS },
    pegelApiUrl: e.PEGEL_API_URL,
    aisFeedUrl: e.AIS_FEED_URL,
    aisVesselTtlSeconds: e.AIS_VESSEL_TTL_SECONDS,
    aisLeaseMs: e.AIS_LEASE_MS,
    chromiumPath: e.CHROMIUM_PATH,
    logLevel: e.LOG_LEVEL,
    supportedLocales: e.SUPPORTED_LOCALES.split(',')
      .map((s) => s.trim())
      .filter(Boolean),
    workerConcurrency: e.WORKER_CONCURRENCY,
    queueConcurrency: e.QUEUE_CONCURRENCY,
    drainTimeoutMs: e.DRAIN_TIMEOUT_MS,
    instances: { api: e.API_INSTANCES, realtime: e.REALTIME_INSTANCES, workers: e.WORKER_INSTANCES },
    ws: {
      heartbeatIntervalMs: e.WS_HEARTBEAT_INTERVAL_MS,
      heartbeatTimeoutMs: e.WS_HEARTBEAT_TIMEOUT_MS,
      ticketTtlSeconds: e.WS_TICKET_TTL_SECONDS,
      maxBufferedBytes: e.WS_MAX_BUFFERED_BYTES,
      maxMessagesPer10s: e.WS_MAX_MESSAGES_PER_10S,
    },
    rateLimit: {
      anonymous: { limit: e.RATE_LIMIT_ANONYMOUS, windowSeconds: e.RATE_LIMIT_ANONYMOUS_WINDOW_SECONDS || window },
      user: { limit: e.RATE_LIMIT_USER, windowSeconds: e.RATE_LIMIT_USER_WINDOW_SECONDS || window },
      apiKey: { limit: e.RATE_LIMIT_API_KEY, windowSeconds: e.RATE_LIMIT_API_KEY_WINDOW_SECONDS || window },
      gpsPost: { limit: e.RATE_LIMIT_GPS_POST, windowSeconds: e.RATE_LIMIT_GPS_POST_WINDOW_SECONDS },
      register: { limit: e.RATE_LIMIT_REGISTER, windowSeconds: e.RATE_LIMIT_REGISTER_WINDOW_SECONDS },
    },
    dataExport: {
      rateLimitPerHour: e.EXPORT_RATE_LIMIT_PER_HOUR,
      timeoutMs: e.EXPORT_TIMEOUT_MS,
      pdfMaxPages: e.EXPORT_PDF_MAX_PAGES,
      archiveTtlSeconds: e.EXPORT_ARCHIVE_TTL_SECONDS,
    },
    stream:
      e.STREAM_AUTH_URL && e.STREAM_API_URL && e.STREAM_CLIENT_ID && e.STREAM_CLIENT_SECRET
        ? {
            authUrl: e.STREAM_AUTH_URL.replace(/\/+$/, ''),
            apiUrl: e.STREAM_API_URL.replace(/\/+$/, ''),
            clientId: e.STREAM_CLIENT_ID,
            clientSecret: e.STREAM_CLIENT_SECRET,
          }
        : null,
    streamTimeoutMs: e.STREAM_TIMEOUT_MS,
    streamRefreshAheadSeconds: e.STREAM_REFRESH_AHEAD_SECONDS,
    chat: {
      syncTimeoutMs: e.CHAT_SYNC_TIMEOUT_SECONDS * 1000,
      memberSyncTimeoutMs: e.CHAT_MEMBER_SYNC_TIMEOUT_SECONDS * 1000,
      cdnUrl: e.CHAT_CDN_URL.replace(/\/+$/, ''),
    },
    passwordHashing: {
      memoryCost: e.PASSWORD_HASH_MEMORY_KIB,
      timeCost: e.PASSWORD_HASH_TIME_COST,
      parallelism: e.PASSWORD_HASH_PARALLELISM,
    },
  };
}

/**
 * How many api processes PM2 starts from API_INSTANCES, read as PM2 reads `instances`: `max` or 0 is
 * one per CPU, a negative number that many fewer than the CPUs.
 */
export function apiInstanceCount(config: Pick<Config, 'instances'>): number {
  const cpus = availableParallelism();
  const n = config.instances.api === 'max' ? 0 : Number(config.instances.api);
  if (!Number.isInteger(n)) return cpus;
  return Math.max(1, n > 0 ? n : cpus + n);
}

/** Entry-point helper: load the config or print the problem and exit 1. */
export function loadConfigOrExit(env: Record<string, string | undefined> = process.env): Config {
  try {
    return loadConfig(env);
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`${err.message}\n`);
      process.exit(1);
    }
    throw err;
  }
}
