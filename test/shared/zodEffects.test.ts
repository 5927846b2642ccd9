import test from 'ava';
import { z } from '../../shared/zod';

// shared/zod.ts replaces ZodEffects' synchronous parse (for garbage's sake); answers must be zod's.
const schema = z.object({
  name: z.string().refine((v) => v.length >= 3, 'must be at least 3 characters'),
  tag: z
    .string()
    .transform((v) => v.toUpperCase())
    .optional(),
  n: z.number().superRefine((v, ctx) => {
    if (v < 0) ctx.addIssue({ code: z.ZodIssueCode.custom, message: `negative at ${ctx.path.join('.')}` });
    if (v > 100) ctx.addIssue({ code: z.ZodIssueCode.custom, message: 'too big', fatal: true });
  }),
});

test('refinements and transforms answer as zod does', (t) => {
  t.deepEqual(schema.safeParse({ name: 'abc', tag: 'x', n: 1 }), {
    success: true,
    data: { name: 'abc', tag: 'X', n: 1 },
  });
  const bad = schema.safeParse({ name: 'a', n: -1 });
  t.false(bad.success);
  t.deepEqual(
    bad.error!.issues.map((i) => [i.path.join('.'), i.message]),
    [
      ['name', 'must be at least 3 characters'],
      ['n', 'negative at n'],
    ],
  );
  // A fatal issue aborts: the object is invalid, the issue is reported.
  const fatal = schema.safeParse({ name: 'abcd', n: 101 });
  t.false(fatal.success);
  t.deepEqual(
    fatal.error!.issues.map((i) => i.message),
    ['too big'],
  );
  // A transform runs only on a valid inner value.
  t.false(
    z
      .string()
      .transform((v) => v.length)
      .safeParse(5).success,
  );
  // A refinement on an invalid inner value reports the inner issue only.
  const inner = z
    .string()
    .refine(() => false, 'never')
    .safeParse(5);
  t.deepEqual(
    inner.error!.issues.map((i) => i.code),
    ['invalid_type'],
  );
});

test('async parses and preprocessors keep zod’s own path', async (t) => {
  t.deepEqual(await schema.parseAsync({ name: 'abcd', n: 2 }), { name: 'abcd', n: 2 });
  const slow = z.string().refine(async (v) => v === 'ok', 'not ok');
  t.true((await slow.safeParseAsync('ok')).success);
  t.false((await slow.safeParseAsync('no')).success);
  t.throws(() => slow.safeParse('ok'), { message: /Async refinement/ });
  t.is(z.preprocess((v) => String(v), z.string()).parse(5), '5');
});
