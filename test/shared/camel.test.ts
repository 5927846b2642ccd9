import test from 'ava';
import { camelKeys } from '../../shared/presenters/camel';

test('camelKeys renames snake_case keys, keeps values, order and nested objects as they are', (t) => {
  const nested = { inner_key: 1 };
  const out = camelKeys({ id: 'a', speed_kmh: 3, is_2fa_enabled: true, created_at: null, meta_data: nested });
  t.deepEqual(Object.keys(out), ['id', 'speedKmh', 'is2faEnabled', 'createdAt', 'metaData']);
  t.deepEqual(out, { id: 'a', speedKmh: 3, is2faEnabled: true, createdAt: null, metaData: nested });
  t.is(out.metaData, nested, 'nested values are the same objects, their keys untouched');
});

test('a name converted before converts the same; names past the memo are still converted', (t) => {
  t.deepEqual(camelKeys({ trip_id: 1 }), { tripId: 1 });
  t.deepEqual(camelKeys({ trip_id: 2 }), { tripId: 2 });
  // More distinct names than the memo keeps: each is converted on its own all the same.
  const many: Record<string, number> = {};
  for (let i = 0; i < 3000; i++) many[`key_${i}_x`] = i;
  const out = camelKeys(many) as Record<string, number>;
  t.is(out.key0X, 0);
  t.is(out.key2999X, 2999);
  t.is(Object.keys(out).length, 3000);
});
