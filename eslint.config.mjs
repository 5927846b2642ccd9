// Lint: typescript-eslint's recommended rules, the project's layer rules and the "one way to do each
// thing" rules of docs/conventions.md. Formatting is prettier's job (`npm run format`).
import js from '@eslint/js';
import tseslint from 'typescript-eslint';
import prettier from 'eslint-config-prettier';
import importX from 'eslint-plugin-import-x';

const PERMISSION =
  '/^(\\*|admin|api_keys|audit|chat|devices|geofences|gps|integrations|locations|oauth_clients|pegel|permissions|roles|settings|trip_categories|trips|two_factor|users):[a-z_.*]+$/';

/** Access is decided in shared/policies.ts; routes, resolvers and realtime only declare or ask. */
const accessRules = [
  {
    selector: "CallExpression[callee.name='forbidden']",
    message: 'Access is decided in shared/policies.ts: use authorize(principal, action, subject).',
  },
  {
    selector: "CallExpression[callee.property.name='has'][callee.object.property.name='permissions']",
    message: 'No ad-hoc permission checks: ask shared/policies.ts (can/authorize).',
  },
  {
    selector: "MemberExpression[property.name='isSuperAdmin']",
    message: 'No ad-hoc permission checks: ask shared/policies.ts (can/authorize).',
  },
  {
    // Allowed: route declarations (`auth: { permission }`, `auth: self('users:read')`) and a resolver's
    // declaration `authorizePermission(principal, 'gps:delete')`, GraphQL's equivalent of `auth:`.
    selector:
      `Literal[value=${PERMISSION}]:not(Property[key.name=/^(permission|own|account|scope)$/] > Literal)` +
      ":not(Property[key.name='auth'] > CallExpression > Literal):not(CallExpression[callee.name='authorizePermission'] > Literal)",
    message: 'Permission names appear only in route access declarations (auth: {...}) and in shared/policies.ts.',
  },
];

/** Routes and resolvers are authenticate → validate → load → authorise → command → present. */
const routeRules = [
  {
    selector: "CallExpression[callee.property.name='transaction']",
    message: 'Transactions belong in a command (shared/commands), not in a route.',
  },
  {
    selector:
      'CallExpression[callee.property.name=/^(insert|insertAndFetch|insertGraph|upsertGraph|patch|patchAndFetch|patchAndFetchById|update|updateAndFetchById|delete|deleteById|del|relate|unrelate|increment|decrement)$/]' +
      ':not([callee.object.callee.name=/^create(Hash|Hmac)$/])',
    message: 'Writes belong in a command (shared/commands), not in a route.',
  },
  {
    selector: "CallExpression[callee.name='recordAuditEvent']",
    message: 'Audit rows are written by the command that makes the change.',
  },
  {
    selector: 'CallExpression[callee.property.name=/^(publish|publishToUser|publishToChannel|invalidateAuth)$/]',
    message: 'Pushes and invalidations are after-commit effects of a command.',
  },
];

/**
 * zod's string `.min()`/`.max()`/`.length()` count UTF-16 units; text bounds are declared with
 * zChars (shared/zod.ts), which counts code points as the database and the OpenAPI document do.
 * Matches a call of one of them at the end of a method chain that starts at `z.string(…)`.
 */
const stringBounds = Array.from({ length: 10 }, (_, depth) => {
  const start = ['callee.object', ...Array(depth).fill('callee.object')].join('.');
  return {
    selector:
      `CallExpression[callee.property.name=/^(min|max|length)$/]` +
      `[${start}.callee.object.name='z'][${start}.callee.property.name='string']`,
    message: 'Bound text with zChars() from shared/zod.ts: it counts characters as code points, as the database does.',
  };
});

const oneWay = [
  ...stringBounds,
  {
    selector: "CallExpression[callee.property.name='query'][arguments.length=0][callee.object.name=/^[A-Z]/]",
    message: 'Pass the database handle: Model.query(db) or Model.query(trx).',
  },
  {
    selector: "CallExpression[callee.property.name='invalidateAuth']",
    message: 'Invalidate credentials one way: invalidateCredentials() from shared/commands/accessChanges.ts.',
  },
  { selector: 'Literal[regex.pattern=/0-9a-f\\]\\{8\\}/]', message: 'Use isUuid() / zUuid() from shared/zod.ts.' },
  {
    // timestamptz minus '1 day' is a calendar day in the session's TimeZone: 23 or 25 hours across
    // a DST change when the database's zone is not UTC.
    selector: "Literal[value=/interval '\\d+ days?'|make_interval\\(\\s*days/i]",
    message:
      "SQL durations in hours or seconds (interval '24 hours'), not calendar days: those depend on the database's TimeZone.",
  },
];

const layer = (self, others) => ({
  files: [`${self}/**/*.ts`],
  rules: {
    'no-restricted-imports': [
      'error',
      {
        patterns: others.map((o) => ({
          group: [`**/${o}/*`, `**/${o}`],
          message: `${self} must not import ${o}: processes talk through queues and pub/sub, shared code lives in shared/.`,
        })),
      },
    ],
  },
});

export default tseslint.config(
  {
    ignores: [
      'dist/**',
      'node_modules/**',
      '.data/**',
      '.run/**',
      'bench/results/**',
      'migrations/**/*.js',
      'shared/client/operations.ts',
    ],
  },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  prettier,
  {
    files: ['**/*.ts'],
    plugins: { 'import-x': importX },
    settings: {
      'import-x/resolver': { node: { extensions: ['.ts', '.js'] } },
      'import-x/parsers': { '@typescript-eslint/parser': ['.ts'] },
      'import-x/extensions': ['.ts', '.js'],
    },
    rules: {
      '@typescript-eslint/no-explicit-any': 'off',
      '@typescript-eslint/no-unused-vars': [
        'error',
        { argsIgnorePattern: '^_', varsIgnorePattern: '^_', caughtErrors: 'none' },
      ],
      '@typescript-eslint/no-empty-object-type': 'off',
      // package.json and the PM2 file are read at run time, relative to dist/.
      '@typescript-eslint/no-require-imports': ['error', { allow: ['package\\.json$', 'ecosystem\\.config\\.js$'] }],
      'import-x/no-cycle': ['error', { ignoreExternal: true }],
      'import-x/no-duplicates': 'error',
      'no-restricted-syntax': ['error', ...oneWay],
    },
  },
  {
    // Nothing imports a test file, so none can be part of a cycle; the cycles among what it imports
    // are found where those modules are linted. no-cycle on the test files was half the lint's time.
    files: ['test/**/*.test.ts'],
    rules: { 'import-x/no-cycle': 'off' },
  },
  {
    files: ['**/*.js', '**/*.cjs'],
    languageOptions: {
      sourceType: 'commonjs',
      globals: { process: 'readonly', module: 'writable', require: 'readonly', __dirname: 'readonly' },
    },
  },
  layer('api', ['realtime', 'workers']),
  layer('realtime', ['api', 'workers']),
  layer('workers', ['api', 'realtime']),
  layer('shared', ['api', 'realtime', 'workers']),
  {
    files: ['api/routes/**/*.ts', 'api/graphql/**/*.ts'],
    rules: { 'no-restricted-syntax': ['error', ...oneWay, ...accessRules, ...routeRules] },
  },
  {
    files: ['realtime/**/*.ts'],
    rules: { 'no-restricted-syntax': ['error', ...oneWay, ...accessRules] },
  },
  {
    // The one place credentials are invalidated, and the tests and tools that drive it.
    files: ['shared/commands/accessChanges.ts', 'test/**/*.ts', 'bench/**/*.ts'],
    rules: { 'no-restricted-syntax': 'off' },
  },
);
