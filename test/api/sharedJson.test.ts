import test from 'ava';
import type { Context } from 'koa';
import { sharedJson } from '../../api/responses';

/** A request for `url` outside any route (no state.url): its URL is the one sent. */
const ctxFor = (url: string) =>
  ({
    url,
    path: url.split('?')[0],
    querystring: url.split('?')[1] ?? '',
    state: {},
    type: '',
    body: undefined as unknown,
  }) as unknown as Context & { body: unknown };

test('one shared result and URL is serialised once; other URLs and results get their own bytes', (t) => {
  const page = { events: [{ id: 1 }], total: 1 };
  let builds = 0;
  const build = (url: string) => () => {
    builds++;
    return { ...page, self: url };
  };
  const a = ctxFor('/v1/admin/audit?page=1');
  const b = ctxFor('/v1/admin/audit?page=1');
  const c = ctxFor('/v1/admin/audit?page=1&limit=5');
  sharedJson(a, page, build(a.url));
  sharedJson(b, page, build(b.url));
  sharedJson(c, page, build(c.url));
  t.is(builds, 2);
  t.is(a.body, b.body);
  t.is(a.type, 'application/json');
  t.deepEqual(JSON.parse(String(a.body)), { events: [{ id: 1 }], total: 1, self: '/v1/admin/audit?page=1' });
  t.deepEqual(JSON.parse(String(c.body)).self, '/v1/admin/audit?page=1&limit=5');
  // Another result (another turn, another user) never reuses these bytes.
  const d = ctxFor('/v1/admin/audit?page=1');
  sharedJson(d, { ...page, total: 2 }, () => ({ total: 2 }));
  t.deepEqual(JSON.parse(String(d.body)), { total: 2 });
});
