// ava's configuration (a file, not package.json, for sortTestFiles).
import { availableParallelism } from 'node:os';

/**
 * Test files that take longest from start to end. Some mostly wait (a drain deadline, an outage, a
 * fleet starting under PM2: `waits`), the others compute. They start first, so that none of them
 * starts late and keeps the run going alone at its end (its last minute was one such file), and
 * they alternate, so that two waiting files seldom hold the slots together while a core stands
 * idle. The rest follow in path order.
 */
const LONGEST_FIRST = [
  'scripts/start', // waits
  'chat/bigGuild',
  'api/badInput',
  'access/roles',
  'tracking/gps',
  'workers/databaseOutage', // waits
  'twoFactor/login',
  'api/rateLimitCluster',
  'api/shutdownOutages', // waits
  'twoFactor/rest',
  'scripts/cli',
  'docs/openapiErrors',
  'api/startup', // waits
  'accounts/loginThrottle',
  'api/drainGarbage', // waits
  'export/dataExport',
  'workers/shutdown', // waits
  'api/redisFaults',
  'api/pm2Reload', // waits
  'docs/swaggerUi',
  'realtime/redisOutageRevocation', // waits
  'workers/ais',
  'api/drain', // waits
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
  // One file more than there are cores: the files listed above spend most of their time waiting,
  // and with one test file per core the core of a waiting one stood idle (18% of a run on two).
  concurrency: availableParallelism() + 1,
  sortTestFiles: (a, b) => rank(a) - rank(b) || a.localeCompare(b, [], { numeric: true }),
};
