import test from 'ava';
import http from 'node:http';
import { QueueName } from '../../shared/queues';
import { ALPHA, fixture } from '../chat/fixtures';
import { startChatBot } from '../helpers/chatBot';
import { createUser } from '../helpers/factories';
import { startSecondApi } from '../helpers/secondApi';
import { useStack } from '../helpers/stack';
import { eventually } from '../helpers/wait';

// Requests that wait on work done elsewhere (the data export's job, up to EXPORT_TIMEOUT_MS = 60 s;
// a member sync's chat bot, up to 60 s) outlast the api's drain (DRAIN_TIMEOUT_MS). Shortly before
// the drain's deadline they answer what their timeout answers instead of being cut.
// No workers: the export's job is never taken. A realtime instance for the chat bot.
const stack = useStack(test, { realtime: 1 });

const DRAIN_MS = 1500;

interface Answer {
  status?: number;
  headers?: http.IncomingHttpHeaders;
  body?: any;
  error?: string;
  at: number;
}

/** One request on a connection of its own; a reset or hang-up is an answer too (`error`). */
function call(url: string, method: string, path: string, token: string): Promise<Answer> {
  return new Promise((resolve) => {
    const req = http.request(url + path, { method, agent: false, headers: { authorization: `Bearer ${token}` } });
    req.on('response', (res) => {
      let text = '';
      res.on('data', (c: Buffer) => (text += c));
      res.on('end', () =>
        resolve({ status: res.statusCode, headers: res.headers, body: JSON.parse(text), at: Date.now() }),
      );
      res.on('error', (err: NodeJS.ErrnoException) => resolve({ error: err.code ?? err.message, at: Date.now() }));
    });
    req.on('error', (err: NodeJS.ErrnoException) => resolve({ error: err.code ?? err.message, at: Date.now() }));
    req.end();
  });
}

test.serial(
  'an export still waiting for its job when the drain nears its deadline: an audited 503 with Retry-After, the job runs on',
  async (t) => {
    const s = stack();
    const user = await createUser(s.db);
    const api = await startSecondApi(s, { drainTimeoutMs: DRAIN_MS });
    let closed: Promise<void> | undefined;
    try {
      const answer = call(api.url, 'GET', '/v1/user/export', user.token);
      const queue = s.api.services.queues.queue(QueueName.dataExport);
      const ofUser = async () =>
        (await queue.getJobs(['waiting', 'prioritized', 'delayed', 'active'])).filter((j) => j.data.userId === user.id);
      await eventually(async () => (await ofUser()).length === 1);

      const closeAt = Date.now();
      closed = api.close();
      const r = await answer;
      t.is(r.error, undefined, 'the export was cut without an answer');
      t.is(r.status, 503);
      t.is(r.headers?.['retry-after'], '5');
      t.is(r.headers?.connection, 'close');
      t.is(r.body.error, 'ServiceUnavailable');
      t.is(r.body.message, 'the data export did not finish in time; try again shortly');
      t.true(r.at - closeAt < DRAIN_MS, `answered ${r.at - closeAt} ms into a ${DRAIN_MS} ms drain`);
      // Audited as a timeout is (docs/data-export.md).
      const audit = await s.db('audit_events').where({ user_id: user.id, event_type: 'data_exported' });
      t.is(audit.length, 1);
      t.is(audit[0].status, 'failure');
      t.is(audit[0].error_message, 'timed out');
      // The job itself stays queued for a worker; a retry joins it.
      t.is((await ofUser()).length, 1);
      await closed;
    } finally {
      await (closed ?? api.close());
    }
  },
);

test.serial(
  'a member sync still waiting for the chat bot when the drain nears its deadline: answered as its timeout, not cut',
  async (t) => {
    const s = stack();
    const mod = await createUser(s.db, { roles: ['role_moderator'] });
    await s.db('chat_guilds').insert({ guild_id: ALPHA, name: 'Alpha' });
    // A bot that takes requests and never answers (a member sync may wait 60 s).
    const bot = await startChatBot(s, fixture, { silent: true });
    const api = await startSecondApi(s, { drainTimeoutMs: DRAIN_MS });
    let closed: Promise<void> | undefined;
    try {
      const answer = call(api.url, 'POST', `/v1/chat/guilds/${ALPHA}/members/sync`, mod.token);
      await bot.waitFor((e) => e.event === 'request' && e.scope === 'CHAT_SYNC_SCOPE_MEMBERS');

      const closeAt = Date.now();
      closed = api.close();
      const r = await answer;
      t.is(r.error, undefined, 'the member sync was cut without an answer');
      t.is(r.status, 200);
      t.deepEqual(r.body, { success: false, error: 'request timed out', members_synced: 0 });
      t.true(r.at - closeAt < DRAIN_MS, `answered ${r.at - closeAt} ms into a ${DRAIN_MS} ms drain`);
      await closed;
    } finally {
      await (closed ?? api.close());
      await bot.stop();
    }
  },
);
