// PM2 fleet: api in cluster mode (one port, N instances), workers and realtime.
// Environment variables are read by each process at start (see README "Configuration").
const env = process.env;
const common = { node_args: '--enable-source-maps', merge_logs: true, time: false };
// The api keeps every in-flight request's objects alive across its database round trips; a larger
// young generation (V8's default semi-space is 16 MB) lets most of them die young instead of being
// copied and promoted. bench:foundation and bench:routes run their targets with these same flags.
// --no-allocation-site-pretenuring: V8 watches where objects are allocated, and a site whose objects
// mostly outlive a scavenge (rows of a batched read, in flight while a turn's answers are built) is
// switched to allocate in the old generation directly. The api's such objects are garbage a few
// milliseconds later, so the old generation filled with them: scavenges of 5-12 ms and a full
// collection every few seconds. Without it, bench:routes measured 5-28% less CPU per request on
// single GETs and lower p99 (README "Garbage dies young").
const apiNodeArgs = `${common.node_args} --max-semi-space-size=64 --no-allocation-site-pretenuring`;
// Stopping and `pm2 reload` send SIGINT; every process then drains (README "Production under PM2").
// The api answers requests in flight for up to DRAIN_TIMEOUT_MS (default 10 s, shared/config.ts), then
// closes Postgres and Redis (≤ 2 s): kill_timeout leaves a margin above both before PM2's SIGKILL.
const apiDrainMs = Number(env.DRAIN_TIMEOUT_MS || 10000);
// wait_ready: a reload stops an old instance once its replacement sent 'ready' (after listen), or
// after listen_timeout, whichever comes first: generous, so a slow start never costs capacity.
const ready = { wait_ready: true, listen_timeout: 30000 };

module.exports = {
  apps: [
    {
      ...common,
      name: 'api',
      script: 'dist/api/server.js',
      node_args: apiNodeArgs,
      exec_mode: 'cluster',
      instances: env.API_INSTANCES || 'max',
      ...ready,
      kill_timeout: apiDrainMs + 5000,
    },
    {
      ...common,
      name: 'workers',
      script: 'dist/workers/index.js',
      exec_mode: 'fork',
      instances: Number(env.WORKER_INSTANCES || 1),
      // Running jobs finish first; one still running at the kill is retried as stalled elsewhere.
      kill_timeout: 60000,
    },
    {
      ...common,
      name: 'realtime',
      script: 'dist/realtime/server.js',
      exec_mode: 'cluster',
      instances: Number(env.REALTIME_INSTANCES || 1),
      ...ready,
      // Clients get close code 1012 and have 1 s to answer it; the rest is Redis and Postgres.
      kill_timeout: 10000,
    },
  ],
};
