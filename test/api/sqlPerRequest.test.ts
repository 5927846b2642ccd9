import test from 'ava';
import { seedFixtures } from '../../bench/routes/fixtures';
import { documentedRoutes, fillRoute } from '../../bench/routes/table';
import { FakePegel, startFakePegel } from '../helpers/fakePegel';
import { fewestStatements } from '../helpers/statements';
import { Stack, startStack } from '../helpers/stack';

/**
 * README "Hot paths": a read of one resource, with a credential already cached, costs at most two
 * SQL statements. The routes are read from the route table (what defineRoute documented when the
 * stack's api mounted its routes): every GET whose JSON answer is one resource, not a list (neither
 * an array nor `data` as one): by id, key or token, /v1/users/me, a user's permissions and roles…;
 * every paginated list; and every unpaged list of one parent named in the path (a user's accounts).
 * Their path values come from the fixtures of bench:routes. Statements are the stack's knex 'query' events (the model layer and the row loader
 * both run through it); each route is measured three times after a warm-up request, in windows in
 * which the credential cache stayed trusted, and the fewest counts (test/helpers/statements.ts).
 */
// The water-level routes need their provider: the local PEGELONLINE fake (test/helpers/fakePegel.ts).
let pegel: FakePegel | undefined;
let running: Stack | undefined;
test.before(async () => {
  pegel = await startFakePegel();
  running = await startStack({ env: { PEGEL_API_URL: pegel.url } });
});
test.after.always(async () => {
  await running?.close();
  await pegel?.close();
});
const stack = () => running!;
const MAX_STATEMENTS = 2;

test("single-resource GETs, paginated lists and a parent's lists issue at most two SQL statements with a cached credential", async (t) => {
  const s = stack();
  const fixtures = await seedFixtures(s.db, { rows: 20, gpsPoints: 200, sample: 1, trackers: 1 }, () => undefined);
  const routes = documentedRoutes().filter((e) => e.method === 'GET');

  const over: string[] = [];
  const broken: string[] = [];
  let single = 0;
  let pages = 0;
  let children = 0;
  for (const entry of routes) {
    const label = `${entry.method} ${entry.path}`;
    const filled = fillRoute(entry, fixtures, s.systemKey, 1);
    if ('reason' in filled) {
      t.log(`${label}: not filled (${filled.reason})`);
      continue;
    }
    const token = filled.credential.kind === 'none' ? undefined : filled.credential.token;
    const warm = await s.request('GET', filled.paths[0], { token });
    if (warm.status < 200 || warm.status >= 300) {
      broken.push(`${label} answered ${warm.status}`);
      continue;
    }
    const body = warm.body as { data?: unknown } | undefined;
    const json = (warm.headers.get('content-type') ?? '').includes('json');
    // A list: an array, `data` as one, or a page of another name ({events, total_count}, {logs, total, hasMore}…).
    const page =
      body && typeof body === 'object' && ['total_count', 'total', 'pagination', 'has_more'].some((k) => k in body);
    // A `paginate()` page: its rows and total are one statement (plus a parent's existence check).
    const paginated = json && body && typeof body === 'object' && 'pagination' in body;
    const list = Array.isArray(body) || Array.isArray(body?.data);
    // A parent's small unpaged list (a user's accounts, bans or roles, a role's permissions): the
    // parent's 404 check and its rows, batched like a single read.
    const childList = json && list && entry.path.includes('/:');
    if (!paginated && !childList && (!json || list || page)) continue;
    if (paginated) pages++;
    else if (childList) children++;
    else single++;
    const fewest = await fewestStatements(s, () => s.request('GET', filled.paths[0], { token }));
    t.log(`${label}: ${fewest}`);
    if (fewest > MAX_STATEMENTS) over.push(`${label}: ${fewest}`);
  }
  t.true(single >= 15, `only ${single} single-resource GETs measured`);
  t.true(pages >= 8, `only ${pages} paginated lists measured`);
  t.true(children >= 5, `only ${children} lists of one parent measured`);
  t.deepEqual(broken, [], 'routes that did not answer 2xx');
  t.deepEqual(over, [], `routes over ${MAX_STATEMENTS} statements per request`);
});
