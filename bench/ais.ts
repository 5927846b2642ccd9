/**
 * AIS ingestion benchmark (npm run bench:ais), one worker's consumer on loopback:
 *
 *   1. decode   AisPipeline alone: NMEA checksum, multi-part reassembly, ggencoder decode and the
 *               merge per MMSI, in memory (what bounds a single consumer);
 *   2. feed     the real AisIngestion (lease, TCP feed connection, once-a-second write of changed
 *               vessels to Redis and vesselsUpdate publish) reading the same sentences from a local
 *               TCP server that writes them as fast as the socket takes them.
 *
 * Traffic: BENCH_AIS_VESSELS (5,000) vessels; per round every vessel sends a type-1 position
 * (80 %), a type-18 position (10 %) or a two-part type 5 (10 %); positions move every round.
 * Goal: ≥ 20,000 sentences/s decoded and merged (a busy national network: a few thousand/s).
 * Rates are given per wall-clock second and per second of this process's CPU time (on a machine
 * shared with other load, the second is the one that says what one worker can do).
 * Environment: REDIS_URL, BENCH_AIS_SENTENCES (300,000), BENCH_AIS_VESSELS (5,000). The run's Redis
 * keys (its own prefix) are deleted at the end.
 */
import 'reflect-metadata';
import net from 'node:net';
import { randomBytes } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { AisEncode } from 'ggencoder';
import Redis from 'ioredis';
import { loadConfig } from '../shared/config';
import { EventBus } from '../shared/events';
import { createLogger } from '../shared/logger';
import { AisPipeline } from '../workers/ais/decoder';
import { AisIngestion } from '../workers/ais/ingest';
import { benchCleanup } from './benchDatabase';

const VESSELS = Number(process.env.BENCH_AIS_VESSELS || 5000);
const SENTENCES = Number(process.env.BENCH_AIS_SENTENCES || 300_000);
const TYPE5 = [
  '!AIVDM,2,1,1,A,55?MbV02;H;s<HtKR20EHE:0@T4@Dn2222222216L961O5Gf0NSQEp6ClRp8,0*1C',
  '!AIVDM,2,2,1,A,88888888880,2*25',
];

/** CPU time (user + system) of this process since `since`, in ms: a figure a busy machine distorts less than wall time. */
function cpuMs(since: NodeJS.CpuUsage): number {
  const d = process.cpuUsage(since);
  return (d.user + d.system) / 1000;
}

function traffic(n: number): string[] {
  const out: string[] = [];
  for (let round = 0; out.length < n; round++) {
    for (let i = 0; i < VESSELS && out.length < n; i++) {
      const kind = (i + round) % 10;
      if (kind === 9) {
        out.push(...TYPE5);
        continue;
      }
      out.push(
        new AisEncode({
          aistype: kind === 8 ? 18 : 1,
          repeat: 0,
          mmsi: String(211000000 + i),
          navstatus: 0,
          lon: 9 + (i % 100) / 100 + round / 10000,
          lat: 53 + Math.floor(i / 100) / 100,
          sog: (round % 200) / 10,
          cog: (round * 7) % 360,
          hdg: (round * 7) % 360,
          utc: round % 60,
        }).nmea,
      );
    }
  }
  return out;
}

async function main(): Promise<void> {
  process.stdout.write(`generating ${SENTENCES} sentences for ${VESSELS} vessels…\n`);
  const sentences = traffic(SENTENCES);

  // 1. decode + merge in memory
  const p = new AisPipeline();
  for (const s of sentences.slice(0, 5000)) p.line(s); // warm-up
  const p2 = new AisPipeline();
  let cpu = process.cpuUsage();
  let t = performance.now();
  for (const s of sentences) p2.line(s);
  const decodeMs = performance.now() - t;
  const decodeCpuMs = cpuMs(cpu);
  const decodeRate = Math.round(sentences.length / (decodeMs / 1000));

  // 2. the real consumer behind a TCP feed, with Redis writes and pushes
  const payload = sentences.join('\r\n') + '\r\n';
  let startWrite = 0;
  let served = false;
  const server = net.createServer((sock) => {
    sock.on('error', () => undefined);
    if (served) return; // the consumer reconnects after the end: nothing more to send
    served = true;
    startWrite = performance.now();
    sock.write(payload);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as net.AddressInfo).port;
  const config = loadConfig({
    ...process.env,
    AIS_FEED_URL: `tcp://127.0.0.1:${port}`,
    REDIS_PREFIX: `benchais:${randomBytes(4).toString('hex')}:`,
    LOG_LEVEL: 'silent',
  });
  const redis = new Redis(config.redisUrl);
  const sub = new Redis(config.redisUrl);
  let ais: AisIngestion | undefined;
  const cleanup = benchCleanup({ redisUrl: config.redisUrl, redisPrefix: config.redisPrefix }, async () => {
    // The consumer stops writing before its keys (vessels, lease, status) are deleted.
    await ais?.close();
    sub.disconnect();
    redis.disconnect();
    server.close();
  });
  try {
    const bus = new EventBus(redis, config);
    const consumer = new AisIngestion({ redis, bus, config, logger: createLogger('bench', 'silent') });
    ais = consumer;
    let pushes = 0;
    let pushedVessels = 0;
    sub.on('message', (_c, raw: string) => {
      pushes++;
      pushedVessels += (JSON.parse(raw) as { data: { vessels: unknown[] } }).data.vessels.length;
    });
    await sub.subscribe(`${config.redisPrefix}ws:vessels`);
    cpu = process.cpuUsage();
    consumer.start();
    while (consumer.pipeline.sentences + consumer.pipeline.errors < sentences.length)
      await new Promise((r) => setTimeout(r, 5));
    const feedMs = performance.now() - startWrite;
    const feedCpuMs = cpuMs(cpu);
    const feedRate = Math.round(sentences.length / (feedMs / 1000));
    t = performance.now();
    await consumer.flush();
    const flushMs = performance.now() - t;
    const stored = await redis.hlen(`${config.redisPrefix}ais:vessels`);
    ais = undefined;
    await consumer.close();
    await new Promise((r) => setTimeout(r, 200));

    const perCpu = (ms: number) => Math.round(sentences.length / (ms / 1000)).toLocaleString('en');
    const rows = [
      [
        'decode + merge (in memory)',
        decodeRate,
        `${sentences.length} in ${decodeMs.toFixed(0)} ms; ${perCpu(decodeCpuMs)}/s of CPU time`,
      ],
      [
        'TCP feed → consumer (Redis writes, pushes)',
        feedRate,
        `${sentences.length} in ${feedMs.toFixed(0)} ms; ${perCpu(feedCpuMs)}/s of this process's CPU time (server writes included); errors ${consumer.pipeline.errors}; ${pushes} pushes of ${pushedVessels} vessels; last flush ${flushMs.toFixed(0)} ms; ${stored} vessels stored`,
      ],
    ];
    process.stdout.write('\n| run | sentences/s | note |\n|---|---:|---|\n');
    for (const [name, rate, note] of rows)
      process.stdout.write(`| ${name} | ${rate.toLocaleString('en')} | ${note} |\n`);
    const feedPerCpu = sentences.length / (feedCpuMs / 1000);
    process.stdout.write(
      `\ngoal ≥ 20,000 sentences/s: wall clock ${feedRate >= 20_000 ? 'met' : 'NOT met'}, ` +
        `per CPU second ${feedPerCpu >= 20_000 ? 'met' : 'NOT met'}\n`,
    );
  } finally {
    await cleanup();
  }
  process.exit(0);
}

main().catch((err) => {
  process.stderr.write(`${err?.stack ?? err}\n`);
  process.exit(1);
});
