import test from 'ava';
import { z, zInput } from '../../shared/zod';

const schema = z.object({
  name: z.string().min(2),
  tags: z.array(z.string()).default([]),
  n: z.coerce.number().int(),
});

test('a clean value parses exactly as the inner schema: output, defaults and coercion', (t) => {
  const input = { name: 'Ada', n: '7' };
  const r = zInput(schema).safeParse(input);
  t.true(r.success);
  t.deepEqual(r.success && r.data, { name: 'Ada', tags: [], n: 7 });
  t.deepEqual(r, schema.safeParse(input));
});

test('a clean value the schema refuses gets the schema’s issues', (t) => {
  const r = zInput(schema).safeParse({ name: 'A', n: 'x' });
  t.false(r.success);
  t.deepEqual(!r.success && r.error.issues.map((i) => i.path.join('.')), ['name', 'n']);
});

test('NUL and lone surrogates anywhere, keys included, are reported at their paths before the schema', (t) => {
  const r = zInput(schema).safeParse({
    name: 'Ad\u0000a',
    tags: ['ok', 'bad\uD800'],
    deep: { ['k\u0000']: [{ x: 'fine' }] },
    n: 1,
  });
  t.false(r.success);
  const issues = !r.success ? r.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).sort() : [];
  t.deepEqual(issues, [
    'deep: keys must not contain NUL characters',
    'name: must not contain NUL characters',
    'tags.1: must not contain unpaired UTF-16 surrogates',
  ]);
});

test('a paired surrogate (an emoji) is text; a value nested 100,000 levels deep is walked without overflow', (t) => {
  t.true(zInput(z.string()).safeParse('sail ⛵ 🚢').success);
  let deep: unknown = 'bottom\u0000';
  for (let i = 0; i < 100_000; i++) deep = [deep];
  const r = zInput(z.unknown()).safeParse(deep);
  t.false(r.success);
  t.is(!r.success && r.error.issues[0].path.length, 100_000);
});

test('parse() throws on a NUL, as the pipeline did', (t) => {
  t.throws(() => zInput(z.string()).parse('a\u0000'), { message: /NUL/ });
  t.is(zInput(z.string()).parse('a'), 'a');
});
