import test from 'ava';
import { PubSub } from '../../shared/events';
import { redisKey, RedisKeys } from '../../shared/redis';

// Key and channel names are a wire format between running instances of different versions: a
// rename loses state (tickets, counters, the latest-GPS cache) during a rolling reload.
test('Redis key families keep their names', (t) => {
  const c = { redisPrefix: 'p:' };
  t.deepEqual(
    [
      redisKey(c, RedisKeys.wsStats),
      redisKey(c, RedisKeys.wsTicket('h')),
      redisKey(c, RedisKeys.assertionNonce('n')),
      redisKey(c, RedisKeys.mailSlot('reset', 'h')),
      redisKey(c, RedisKeys.rateLimit('user', 'user:u', 7)),
      redisKey(c, RedisKeys.gpsLatest),
      redisKey(c, RedisKeys.gpsLatestDevice('d')),
      redisKey(c, RedisKeys.gpsLatestGeneration),
      redisKey(c, RedisKeys.gpsLatestDeviceGeneration('d')),
      redisKey(c, RedisKeys.geofenceState('d', 'f')),
      redisKey(c, RedisKeys.geofencePending('d')),
      redisKey(c, RedisKeys.geofenceTransitions('d')),
      redisKey(c, RedisKeys.bull),
      redisKey(c, RedisKeys.exportRate('u', 7)),
      redisKey(c, RedisKeys.exportArchive('a')),
      redisKey(c, RedisKeys.exportWaiters('u')),
    ],
    [
      'p:ws:stats',
      'p:ws:ticket:h',
      'p:idaa:n',
      'p:mailslot:reset:h',
      'p:rl:user:user:u:7',
      'p:gps:latest',
      'p:gps:latest:device:d',
      'p:gps:latest:gen',
      'p:gps:latest:gen:device:d',
      'p:geofence:state:d:f',
      'p:geofence:pending:d',
      'p:geofence:transitions:d',
      'p:bull',
      'p:export:rate:u:7',
      'p:export:archive:a',
      'p:export:waiters:u',
    ],
  );
});

test('key families and pub/sub channels do not collide', (t) => {
  const keys = [
    'ws:stats',
    'ws:ticket:',
    'idaa:',
    'mailslot:',
    'rl:',
    'gps:latest',
    'geofence:state:',
    'geofence:pending:',
    'geofence:transitions:',
    'bull',
    'export:',
  ];
  const channels = [
    PubSub.ws('x'),
    PubSub.authInvalidate,
    PubSub.authAck('a'),
    PubSub.rpcReply('i'),
    PubSub.botRequest('i'),
  ];
  for (const ch of channels) {
    // ws:<channel> shares the ws: namespace with two keys; channel names never start with stats/ticket.
    for (const k of keys) t.false(ch.startsWith(k), `${ch} starts with key family ${k}`);
  }
});
