import test from 'ava';
import { createUser } from '../helpers/factories';
import { useStack } from '../helpers/stack';
import { explainJson, vacuumSettled } from '../helpers/statements';

/**
 * The user view's last sign-in platform (GET /v1/users/{id}/profile `provider`) is the platform of
 * the user's newest session that names one, read through the index of migration
 * 20261201000100_sessions_last_platform_index: one entry per user, not every session of the user
 * fetched and sorted (a user with hundreds of sessions made every profile read them all).
 */
const stack = useStack(test);

test('a profile names the newest session platform, read by index however many sessions the user has', async (t) => {
  const s = stack();
  const admin = await createUser(s.db, { roles: ['role_admin'] });
  const user = await createUser(s.db, { roles: [] });
  // Only these sessions (not the factory's own): 300 of them, older ones on 'twitch', the newest named one on 'discord', and newer ones
  // without a platform (API sessions), which do not count.
  await s.db('sessions').where('user_id', user.id).delete();
  await s.db.raw(
    `INSERT INTO sessions (token_hash, user_id, expires_at, created_at, platform_slug)
     SELECT md5('old' || i) || md5('x' || i), ?::uuid, now() + interval '1 day', now() - make_interval(mins => 400 - i), 'twitch'
       FROM generate_series(1, 297) i`,
    [user.id],
  );
  await s.db('sessions').insert([
    {
      token_hash: 'b'.repeat(64),
      user_id: user.id,
      expires_at: new Date(Date.now() + 86_400_000),
      created_at: new Date(Date.now() - 60_000),
      platform_slug: 'discord',
    },
    ...[1, 2].map((i) => ({
      token_hash: String(i).repeat(64),
      user_id: user.id,
      expires_at: new Date(Date.now() + 86_400_000),
      created_at: new Date(Date.now() - i * 1000),
      platform_slug: null,
    })),
  ]);

  // The statement the profile route sends (the user view, batched by id).
  let view: { sql: string; bindings: unknown[] } | undefined;
  const listen = (q: { sql: string; bindings: unknown[] }) => {
    if (/platform_slug IS NOT NULL/.test(q.sql)) view = q;
  };
  s.api.services.db.on('query', listen);
  const r = await s.request('GET', `/v1/users/${user.id}/profile`, { token: admin.token });
  s.api.services.db.off('query', listen);
  t.is(r.status, 200, r.text);
  t.is(r.body.provider, 'discord');
  t.truthy(view, 'the user view ran');

  // The session subquery reads the index from the newest entry: no sort of the user's sessions,
  // and one row read, not 300.
  await vacuumSettled(s.db, 'sessions');
  const plan = await explainJson(s.db, view!, { analyze: true });
  type PlanNode = {
    'Node Type': string;
    'Relation Name'?: string;
    'Index Name'?: string;
    'Actual Rows'?: number;
    Plans?: PlanNode[];
  };
  const sessionScans: PlanNode[] = [];
  let sorts = 0;
  const walk = (n: PlanNode, underSessions: boolean) => {
    if (n['Relation Name'] === 'sessions') sessionScans.push(n);
    if (n['Node Type'] === 'Sort' && underSessions) sorts++;
    n.Plans?.forEach((c) => walk(c, underSessions || JSON.stringify(c).includes('"sessions"')));
  };
  (JSON.parse(plan) as Array<{ Plan: PlanNode }>).forEach((p) => walk(p.Plan, false));
  t.is(sessionScans.length, 1, plan);
  t.is(sessionScans[0]['Index Name'], 'sessions_user_platform_recent', plan);
  t.is(sessionScans[0]['Actual Rows'], 1, plan);
  t.is(sorts, 0, plan);
});
