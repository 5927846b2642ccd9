import test from 'ava';
import { randomUUID } from 'node:crypto';
import { tableVersionTag } from '../../shared/caches/tableVersions';
import { contactsOfLocations, historyOfTrips } from '../../shared/queries/trackingBatches';
import { activeConsents } from '../../shared/queries/oauth';
import { userAccounts } from '../../shared/queries/users';
import { createUser } from '../helpers/factories';
import { useStack } from '../helpers/stack';

const stack = useStack(test);

/** The tables these batch reads read: a query-builder compilation on one of them is a regression. */
const READ_TABLES = /^(platform_accounts|location_contacts|trip_status_history|table_versions|oauth_consents)\b/;

// Building and compiling a batch's query through knex or objection cost about 250 µs of CPU per
// batch (700 µs for withGraphJoined), more than its round trip: these reads compile their SQL once.
test.serial(
  'batched reads of accounts, consents, contacts, trip history and table versions compile no SQL per batch',
  async (t) => {
    const db = stack().db;
    const user = await createUser(db);
    const [location] = await db('locations').insert({ name: 'harbour' }).returning('id');
    await db('location_contacts').insert([
      { location_id: location.id, name: 'Bea' },
      { location_id: location.id, name: 'al' },
    ]);
    const [trip] = await db('trips').insert({ name: 'crossing' }).returning('id');
    await db('trip_status_history').insert({ trip_id: trip.id, old_status: 'planned', new_status: 'active' });
    const [app] = await db('oauth_clients').insert({ name: 'Tide app' }).returning('id');
    const [revoked] = await db('oauth_clients').insert({ name: 'Old app' }).returning('id');
    await db('oauth_consents').insert([
      { user_id: user.id, client_id: app.id, scopes: JSON.stringify(['gps:read']) },
      { user_id: user.id, client_id: revoked.id, revoked_at: new Date() },
    ]);
    const read = () =>
      Promise.all([
        userAccounts(db, user.id),
        contactsOfLocations(db, [location.id, randomUUID()]),
        historyOfTrips(db, [trip.id]),
        tableVersionTag(db, ['trips']),
        activeConsents(db, user.id),
      ]);
    await read(); // the first batch of each may compile its text

    const client = db.client as { queryCompiler: (builder: unknown, ...rest: unknown[]) => unknown };
    const original = client.queryCompiler;
    const compiled: string[] = [];
    client.queryCompiler = function (this: unknown, builder: unknown, ...rest: unknown[]) {
      compiled.push(String((builder as { _single?: { table?: unknown } })._single?.table ?? ''));
      return original.call(this, builder, ...rest);
    };
    let last: Awaited<ReturnType<typeof read>>;
    try {
      for (let i = 0; i < 5; i++) last = await read();
    } finally {
      client.queryCompiler = original;
    }
    t.deepEqual(
      compiled.filter((table) => READ_TABLES.test(table)),
      [],
    );

    // And the answers are the same as before: the account with its platform's slug and name.
    const [accounts, contacts, history, tag, consents] = last!;
    t.is(accounts.length, 1);
    t.is(accounts[0].user_id, user.id);
    t.is(accounts[0].email, user.email);
    t.is(accounts[0].platform?.slug, 'email');
    t.is(typeof accounts[0].platform?.name, 'string');
    t.true(accounts[0].created_at instanceof Date);
    // Contacts by name, case-insensitively; the history entry as a model with its Date.
    t.deepEqual(
      contacts.get(location.id)?.map((c) => c.name),
      ['al', 'Bea'],
    );
    t.is(contacts.size, 1);
    t.is(history.get(trip.id)?.[0].new_status, 'active');
    t.true(history.get(trip.id)?.[0].changed_at instanceof Date);
    t.regex(tag, /^trips:\d+$/);
    // Only the standing consent, with its client's name.
    t.deepEqual(
      consents.map((c) => [c.client_id, c.client.name, c.scopes]),
      [[app.id, 'Tide app', ['gps:read']]],
    );
  },
);
