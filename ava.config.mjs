// ava's configuration (a file, not package.json, for sortTestFiles).

/**
 * Test files that take longest from start to end, most of them waiting (a drain deadline, an outage,
 * a fleet starting under PM2) rather than computing. They start first, so that none of them starts
 * late and keeps the run going with the other worker idle: the suite is CPU-bound on two cores,
 * and its last minute was one such file alone. The rest follow in path order.
 */
const LONGEST_FIRST = [
  'scripts/start',
  'chat/bigGuild',
  'api/drainWaits',
  'api/badInput',
  'workers/databaseOutage',
  'access/roles',
  'scripts/cli',
  'tracking/gps',
  'api/drain',
  'twoFactor/login',
  'api/shutdownOutages',
  'api/rateLimitCluster',
  'api/startup',
  'api/redisFaults',
  'workers/shutdown',
  'docs/swaggerUi',
  'api/pm2Reload',
  'realtime/redisOutageRevocation',
  'accounts/loginThrottle',
  'export/dataExport',
  'api/drainGarbage',
  'workers/ais',
];

const rank = (file) => {
  const i = LONGEST_FIRST.findIndex(
    (name) => file.endsWith(`/test/${name}.test.ts`) || file.endsWith(`/test/${name}.test.js`),
  );
  return i < 0 ? LONGEST_FIRST.length : i;
};

export default {
  typescript: {
    rewritePaths: { 'test/': 'dist/test/' },
    compile: false,
  },
  files: ['test/**/*.test.ts'],
  timeout: '2m',
  workerThreads: false,
  sortTestFiles: (a, b) => rank(a) - rank(b) || a.localeCompare(b, [], { numeric: true }),
};
