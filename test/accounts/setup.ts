import type { TestFn } from 'ava';
import { useStack, Stack } from '../helpers/stack';
import { Mailbox, startMailbox } from './mailbox';

/**
 * A stack with in-process workers whose email queue delivers to a real SMTP receiver started
 * for the file. Anonymous rate limits are raised: these files sign in anonymously many times.
 */
export function useAccountsStack(test: TestFn): { stack: () => Stack; mailbox: () => Mailbox } {
  let box: Mailbox | undefined;
  const env: Record<string, string> = { RATE_LIMIT_ANONYMOUS: '100000', APP_URL: 'https://app.example.test' };
  test.before(async () => {
    box = await startMailbox();
    env.SMTP_URL = box.url;
  });
  const stack = useStack(test, { env, workers: true });
  test.after.always(async () => {
    await box?.close();
  });
  return {
    stack,
    mailbox: () => {
      if (!box) throw new Error('mailbox not started');
      return box;
    },
  };
}

let n = 0;
/** A fresh address per call. */
export function freshEmail(tag = 'u'): string {
  return `${tag}.${Date.now().toString(36)}${(n++).toString(36)}${Math.random().toString(36).slice(2, 6)}@example.test`;
}
