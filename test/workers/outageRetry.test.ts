import test from 'ava';
import { serviceUnavailable } from '../../shared/errors';
import { isDependencyOutage, OUTAGE_RETRY_MAX_DELAY_MS, outageRetryDelay } from '../../workers/outageRetry';

const pgError = (code: string, message = 'x') => Object.assign(new Error(message), { code });

test('outages are told from other failures', (t) => {
  // PostgreSQL away: refused, shut down, starting, pool timeout, statement timeout; any 503.
  for (const err of [
    pgError('ECONNREFUSED', 'connect ECONNREFUSED 127.0.0.1:5432'),
    pgError('57P01', 'terminating connection due to administrator command'),
    pgError('57P03', 'the database system is starting up'),
    pgError('57014', 'canceling statement due to statement timeout'),
    Object.assign(new Error('Knex: Timeout acquiring a connection.'), { name: 'KnexTimeoutError' }),
    new Error('Connection terminated unexpectedly'),
    Object.assign(new Error('wrapped'), { nativeError: pgError('ECONNRESET') }),
    serviceUnavailable('the state store is unavailable'),
    // Redis away (the fail-fast connection's messages).
    new Error('Connection is closed.'),
    new Error("Stream isn't writeable and enableOfflineQueue options is false"),
    new Error('Command timed out'),
    // Commands in flight when the connection dropped, failed by ioredis once its retries ran out.
    new Error(
      'Reached the max retries per request limit (which is 20). Refer to "maxRetriesPerRequest" option for details.',
    ),
  ])
    t.true(isDependencyOutage(err), (err as Error).message);
  // A bug or input the job cannot handle: a wait mends none of them.
  for (const err of [
    pgError('22P02', 'invalid input syntax for type uuid: "x"'),
    pgError('23505', 'duplicate key value violates unique constraint'),
    pgError('08P01', 'bind message supplies 3 parameters'),
    pgError('P0001', 'injected failure'),
    new TypeError("Cannot read properties of undefined (reading 'id')"),
    new RangeError('Maximum call stack size exceeded'),
    'a string',
    undefined,
  ])
    t.false(isDependencyOutage(err), String(err));
});

test('the wait starts at the queue’s backoff delay and doubles to a cap', (t) => {
  t.deepEqual(
    [1, 2, 3, 4, 5, 6, 7, 100, 1e9].map((n) => outageRetryDelay('geofence', n)),
    [1000, 2000, 4000, 8000, 16000, 30000, 30000, 30000, 30000],
  );
  t.is(OUTAGE_RETRY_MAX_DELAY_MS, 30_000);
});
