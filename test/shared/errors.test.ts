import test from 'ava';
import { badRequest } from '../../shared/errors';

test('a 400 whose message names a field lists it in details; one that gives details keeps them', (t) => {
  t.deepEqual(badRequest('role_id: no such role').extra?.details, [{ field: 'role_id', message: 'no such role' }]);
  t.deepEqual(badRequest('points.3.lat: too large').extra?.details, [{ field: 'points.3.lat', message: 'too large' }]);
  t.is(badRequest('invalid JSON body').extra?.details, undefined);
  t.deepEqual(badRequest('a: b', { details: [] }).extra?.details, []);
});
