import test from 'ava';
import { zChars } from '../../shared/zod';

/** One code point, two UTF-16 units. */
const SHIP = '\u{1F6A2}';

test('zChars: both bounds count code points, with one wording, and the document states them', (t) => {
  const schema = zChars({ trim: true, min: 2, max: 3 });
  t.true(schema.safeParse(` ${SHIP.repeat(3)} `).success);
  t.is(schema.parse(` ${SHIP}x `), `${SHIP}x`);
  const short = schema.safeParse(`  ${SHIP}  `);
  t.false(short.success);
  t.is(short.error?.issues[0].message, 'must be at least 2 characters');
  t.is(schema.safeParse(SHIP.repeat(4)).error?.issues[0].message, 'must be at most 3 characters');
  t.is(zChars({ min: 1, max: 5 }).safeParse('').error?.issues[0].message, 'must not be empty');
  t.is(
    zChars({ min: 16, minMessage: 'is not a valid token', max: 20 }).safeParse('x').error?.issues[0].message,
    'is not a valid token',
  );
  t.deepEqual(schema._def.openapi?.metadata, { minLength: 2, maxLength: 3 });
});
