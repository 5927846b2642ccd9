import test from 'ava';
import type { AddressInfo } from 'node:net';
import { SMTPServer } from 'smtp-server';
import { EmailOutbox } from '../../shared/models/EmailOutbox';
import { spawnService } from '../helpers/processes';
import { startStack } from '../helpers/stack';
import { orAfter } from '../helpers/wait';

test('SIGTERM: a job that is running finishes before the worker process exits', async (t) => {
  // An SMTP server that holds the message until told to accept it: the email job is then running.
  let release: () => void = () => undefined;
  const released = new Promise<void>((r) => (release = r));
  let receiving: () => void = () => undefined;
  const inData = new Promise<void>((r) => (receiving = r));
  const received: string[] = [];
  const smtp = new SMTPServer({
    authOptional: true,
    disabledCommands: ['STARTTLS'],
    onData(stream, session, cb) {
      stream.resume();
      stream.on('end', () => {
        receiving();
        void released.then(() => {
          received.push(session.envelope.rcptTo.map((r) => r.address).join(','));
          cb();
        });
      });
    },
  });
  await new Promise<void>((r) => smtp.listen(0, '127.0.0.1', r));
  const smtpUrl = `smtp://127.0.0.1:${(smtp.server.address() as AddressInfo).port}`;
  const s = await startStack({ env: { SMTP_URL: smtpUrl } });
  const workers = await spawnService('workers', s.env, 'workers ready');
  try {
    const mail = await EmailOutbox.query().insertAndFetch({
      to_address: 'drain@example.test',
      subject: 'Drain',
      text_body: 'hello',
      template: 'test',
    });
    await s.api.services.queues.enqueue('email', { outboxId: mail.id });
    await inData;
    workers.child.kill('SIGTERM');
    await workers.waitForLog('workers draining');
    // The job is mid-send: the process waits for it rather than exiting.
    await new Promise((r) => setTimeout(r, 500));
    t.is(workers.child.exitCode, null);
    release();
    const exit = await orAfter(workers.exited, 20_000, null);
    t.is(exit?.code, 0);
    t.deepEqual(received, ['drain@example.test']);
    t.is((await EmailOutbox.query().findById(mail.id))!.status, 'sent');
  } finally {
    release();
    await workers.kill();
    await s.close();
    await new Promise<void>((r) => smtp.close(() => r()));
  }
});
