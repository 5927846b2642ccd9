import dgram from 'node:dgram';
import net from 'node:net';
import { randomUUID } from 'node:crypto';
import type Redis from 'ioredis';
import type { Config } from '../../shared/config';
import { presentVessel, VesselState } from '../../shared/domain/ais';
import type { EventBus } from '../../shared/events';
import type { Logger } from '../../shared/logger';
import { redisKey, RedisKeys } from '../../shared/redis';
import { AIS_FLUSH_MS } from '../../shared/caches/aisStatus';
import { AisPipeline } from './decoder';

const BACKOFF_MIN_MS = 250;
const BACKOFF_MAX_MS = 30_000;
/** A line longer than this is not NMEA: the buffer is dropped and counted. */
const MAX_LINE = 1024;

const RENEW_SCRIPT = `if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) else return 0 end`;
const RELEASE_SCRIPT = `if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) else return 0 end`;

/**
 * A connection to the feed: a TCP client that reconnects with exponential backoff, or a UDP socket
 * bound to the URL's host and port (a UDP feed sends datagrams to us) that rebinds after an error.
 */
class FeedConnection {
  private socket?: net.Socket | dgram.Socket;
  private timer?: NodeJS.Timeout;
  private backoff = BACKOFF_MIN_MS;
  private stopped = false;
  connected = false;
  connects = 0;

  constructor(
    private readonly url: URL,
    private readonly onLine: (line: string) => void,
    private readonly onGarbage: () => void,
    private readonly logger: Logger,
  ) {}

  start(): void {
    this.stopped = false;
    this.open();
  }

  private open(): void {
    if (this.stopped) return;
    const host = this.url.hostname || '127.0.0.1';
    const port = Number(this.url.port);
    if (this.url.protocol === 'udp:') {
      const sock = dgram.createSocket({ type: host.includes(':') ? 'udp6' : 'udp4', reuseAddr: true });
      this.socket = sock;
      sock.on('message', (msg) => {
        this.backoff = BACKOFF_MIN_MS;
        for (const line of msg.toString('latin1').split('\n')) if (line.trim()) this.onLine(line);
      });
      sock.on('error', (err) => {
        this.logger.warn({ err: err.message }, 'ais feed socket error');
        sock.close();
      });
      sock.on('close', () => this.dropped());
      sock.bind(port, host, () => {
        this.connected = true;
        this.connects++;
        this.logger.info({ feed: this.url.origin }, 'ais feed connected');
      });
      return;
    }
    const sock = net.createConnection({ host, port });
    this.socket = sock;
    let buf = '';
    sock.setEncoding('latin1');
    sock.setKeepAlive(true, 10_000);
    sock.on('connect', () => {
      this.connected = true;
      this.connects++;
      this.logger.info({ feed: `tcp://${host}:${port}` }, 'ais feed connected');
    });
    sock.on('data', (chunk: string) => {
      this.backoff = BACKOFF_MIN_MS;
      buf += chunk;
      let nl: number;
      while ((nl = buf.indexOf('\n')) >= 0) {
        const line = buf.slice(0, nl);
        buf = buf.slice(nl + 1);
        if (line.trim()) this.onLine(line);
      }
      if (buf.length > MAX_LINE) {
        buf = '';
        this.onGarbage();
      }
    });
    sock.on('error', (err) => this.logger.warn({ err: err.message }, 'ais feed socket error'));
    sock.on('close', () => this.dropped());
  }

  private dropped(): void {
    const was = this.connected;
    this.connected = false;
    this.socket = undefined;
    if (this.stopped) return;
    if (was) this.logger.warn('ais feed disconnected');
    const delay = this.backoff;
    this.backoff = Math.min(this.backoff * 2, BACKOFF_MAX_MS);
    this.timer = setTimeout(() => this.open(), delay);
  }

  stop(): void {
    this.stopped = true;
    clearTimeout(this.timer);
    const s = this.socket;
    this.socket = undefined;
    this.connected = false;
    if (s instanceof net.Socket) s.destroy();
    else if (s) s.close();
  }
}

type LeaseRedis = Redis & {
  aisLeaseRenew(key: string, token: string, ms: number): Promise<number>;
  aisLeaseRelease(key: string, token: string): Promise<number>;
};

/**
 * AIS ingestion: exactly one consumer of AIS_FEED_URL across every worker instance. Each instance
 * runs one of these; the one holding the Redis lease (`ais:lease`, renewed every third of
 * AIS_LEASE_MS) connects to the feed, the others try to take the lease over every tick, so a holder
 * that dies is replaced within about AIS_LEASE_MS. The holder decodes and merges in memory and,
 * once a second, writes the changed vessels to Redis (`ais:vessels`, `ais:vessels:seen`), pushes
 * one vesselsUpdate with them on `vessels`, expires vessels not heard for AIS_VESSEL_TTL_SECONDS
 * and reports its counters in `ais:status`.
 */
export class AisIngestion {
  readonly pipeline = new AisPipeline();
  private readonly token = randomUUID();
  private readonly redis: LeaseRedis;
  private feed?: FeedConnection;
  private leaseTimer?: NodeJS.Timeout;
  private flushTimer?: NodeJS.Timeout;
  private holding = false;
  private reportedSentences = 0;
  private reportedErrors = 0;
  private closed = false;

  constructor(
    private readonly deps: { redis: Redis; bus: EventBus; config: Config; logger: Logger },
    private readonly url = new URL(deps.config.aisFeedUrl!),
  ) {
    this.redis = deps.redis as LeaseRedis;
    if (!(this.redis as Partial<LeaseRedis>).aisLeaseRenew) {
      this.redis.defineCommand('aisLeaseRenew', { numberOfKeys: 1, lua: RENEW_SCRIPT });
      this.redis.defineCommand('aisLeaseRelease', { numberOfKeys: 1, lua: RELEASE_SCRIPT });
    }
  }

  private key(k: string): string {
    return redisKey(this.deps.config, k);
  }

  get isHolder(): boolean {
    return this.holding;
  }

  start(): void {
    void this.leaseTick();
  }

  private schedule(): void {
    if (this.closed) return;
    this.leaseTimer = setTimeout(
      () => void this.leaseTick(),
      Math.max(100, Math.floor(this.deps.config.aisLeaseMs / 3)),
    );
  }

  private async leaseTick(): Promise<void> {
    const { config, logger } = this.deps;
    const lease = this.key(RedisKeys.aisLease);
    try {
      if (this.holding) {
        const ok = await this.redis.aisLeaseRenew(lease, this.token, config.aisLeaseMs);
        if (!ok) {
          logger.warn('ais feed lease lost');
          await this.release(false);
        }
      } else {
        const ok = await this.redis.set(lease, this.token, 'PX', config.aisLeaseMs, 'NX');
        if (ok === 'OK' && !this.closed) await this.acquired();
      }
    } catch (err) {
      // Without Redis the lease cannot be renewed: another instance may take it once it expires.
      if (this.holding) {
        logger.warn({ err: (err as Error).message }, 'ais feed lease not renewed; stopping the consumer');
        await this.release(false);
      }
    }
    this.schedule();
  }

  private async acquired(): Promise<void> {
    this.holding = true;
    this.deps.logger.info('ais feed lease acquired');
    // The previous holder's vessels, so static and position reports keep merging across a takeover.
    const stored = await this.redis.hgetall(this.key(RedisKeys.aisVessels)).catch(() => ({}));
    for (const raw of Object.values(stored)) {
      try {
        const v = JSON.parse(raw) as VesselState;
        if (!this.pipeline.vessels.has(v.mmsi)) this.pipeline.vessels.set(v.mmsi, v);
      } catch {
        /* a damaged entry is dropped at the next write */
      }
    }
    this.feed = new FeedConnection(
      this.url,
      (line) => this.pipeline.line(line),
      () => this.pipeline.errors++,
      this.deps.logger,
    );
    this.feed.start();
    this.scheduleFlush(Date.now());
  }

  /**
   * The next flush starts AIS_FLUSH_MS after the previous one started, never sooner (timers do not
   * fire early, unlike a catching-up setInterval after a stall), so pushes are at least a second apart.
   */
  private scheduleFlush(lastStart: number): void {
    if (!this.holding) return;
    this.flushTimer = setTimeout(
      () => {
        const start = Date.now();
        void this.flush()
          .catch((err) => this.deps.logger.warn({ err: (err as Error).message }, 'ais flush failed'))
          .finally(() => this.scheduleFlush(start));
      },
      Math.max(0, lastStart + AIS_FLUSH_MS - Date.now()),
    );
  }

  /** Stops consuming; with `giveBack` the lease is deleted so another instance takes over at once. */
  private async release(giveBack: boolean): Promise<void> {
    if (!this.holding) return;
    this.holding = false;
    this.feed?.stop();
    this.feed = undefined;
    clearTimeout(this.flushTimer);
    await this.flush().catch(() => undefined);
    await this.redis.hset(this.key(RedisKeys.aisStatus), 'connected', '0').catch(() => undefined);
    if (giveBack) await this.redis.aisLeaseRelease(this.key(RedisKeys.aisLease), this.token).catch(() => undefined);
  }

  /** Writes changed vessels, pushes them, expires silent ones and reports the counters. */
  async flush(now = Date.now()): Promise<number> {
    const { redis, bus, config } = this.deps;
    this.pipeline.expirePending(now);
    const changed = this.pipeline.takeDirty();
    const cutoff = now - config.aisVesselTtlSeconds * 1000;
    const gone = this.pipeline.expireVessels(cutoff);
    const vesselsKey = this.key(RedisKeys.aisVessels);
    const seenKey = this.key(RedisKeys.aisVesselsSeen);
    const statusKey = this.key(RedisKeys.aisStatus);
    const ttl = config.aisVesselTtlSeconds;
    const m = redis.multi();
    if (changed.length) {
      const fields: string[] = [];
      const seen: Array<string | number> = [];
      for (const v of changed) {
        fields.push(String(v.mmsi), JSON.stringify(v));
        seen.push(v.seen, String(v.mmsi));
      }
      m.hset(vesselsKey, ...fields);
      m.zadd(seenKey, ...seen);
    }
    if (gone.length) {
      m.hdel(vesselsKey, ...gone.map(String));
      m.zrem(seenKey, ...gone.map(String));
    }
    // Whole families expire too when no consumer is left to prune them.
    m.expire(vesselsKey, ttl);
    m.expire(seenKey, ttl);
    const sentences = this.pipeline.sentences - this.reportedSentences;
    const errors = this.pipeline.errors - this.reportedErrors;
    m.hincrby(statusKey, 'sentences', sentences);
    m.hincrby(statusKey, 'errors', errors);
    m.hset(statusKey, {
      connected: this.feed?.connected ? '1' : '0',
      vessels: String(this.pipeline.vessels.size),
      at: String(now),
    });
    await m.exec();
    this.reportedSentences += sentences;
    this.reportedErrors += errors;
    if (changed.length)
      await bus.publish('vessels', { type: 'vesselsUpdate', data: { vessels: changed.map(presentVessel) } });
    return changed.length;
  }

  async close(): Promise<void> {
    this.closed = true;
    clearTimeout(this.leaseTimer);
    await this.release(true);
  }
}
