// PM2 fleet: api in cluster mode (one port, N instances), workers and realtime.
// Environment variables are read by each process at start (see README "Configuration").
const env = process.env;
const common = { node_args: '--enable-source-maps', merge_logs: true, time: false };
// The api keeps every in-flight request's objects alive across its database round trips; a larger
// young generation (V8's default semi-space is 16 MB) lets most of them die young instead of being
// copied and promoted. bench:foundation runs its targets with these same flags.
const apiNodeArgs = `${common.node_args} --max-semi-space-size=64`;

module.exports = {
  apps: [
    {
      ...common,
      name: 'api',
      script: 'dist/api/server.js',
      node_args: apiNodeArgs,
      exec_mode: 'cluster',
      instances: env.API_INSTANCES || 'max',
      kill_timeout: 15000,
      listen_timeout: 20000,
    },
    {
      ...common,
      name: 'workers',
      script: 'dist/workers/index.js',
      exec_mode: 'fork',
      instances: Number(env.WORKER_INSTANCES || 1),
      kill_timeout: 60000,
    },
    {
      ...common,
      name: 'realtime',
      script: 'dist/realtime/server.js',
      exec_mode: 'cluster',
      instances: Number(env.REALTIME_INSTANCES || 1),
      kill_timeout: 10000,
    },
  ],
};
