import type { AddressInfo } from 'node:net';
import { SMTPServer } from 'smtp-server';
import { sha256 } from '../../shared/crypto';

export interface ReceivedMail {
  to: string[];
  subject: string;
  /** Decoded text/plain part. */
  text: string;
  /** Decoded text/html part, when present. */
  html: string;
  /** The Message-ID header as sent, angle brackets included. */
  messageId: string;
  raw: string;
}

export interface Mailbox {
  url: string;
  mails: ReceivedMail[];
  /** How many of the next deliveries to refuse with an SMTP error (`failCode`), to make the sender retry or give up. */
  failNext: number;
  /** The reply code of a refused delivery: 451 (temporary, the default) or a permanent 5xx. */
  failCode: number;
  /** First mail to `to` (newer than `after` mails already seen) matching `pred`, waiting up to `ms`. */
  waitFor(to: string, pred?: (m: ReceivedMail) => boolean, ms?: number): Promise<ReceivedMail>;
  close(): Promise<void>;
}

function decodeQuotedPrintable(s: string): string {
  const bytes: number[] = [];
  const src = s.replace(/=\r?\n/g, '');
  for (let i = 0; i < src.length; i++) {
    if (src[i] === '=' && /^[0-9A-F]{2}$/i.test(src.slice(i + 1, i + 3))) {
      bytes.push(parseInt(src.slice(i + 1, i + 3), 16));
      i += 2;
    } else bytes.push(...Buffer.from(src[i], 'utf8'));
  }
  return Buffer.from(bytes).toString('utf8');
}

function decodeWords(s: string): string {
  return s.replace(/=\?([^?]+)\?([QB])\?([^?]*)\?=\s*/gi, (_, _cs, enc: string, data: string) =>
    enc.toUpperCase() === 'B'
      ? Buffer.from(data, 'base64').toString('utf8')
      : decodeQuotedPrintable(data.replace(/_/g, ' ')),
  );
}

interface Part {
  headers: Map<string, string>;
  body: string;
}

function parsePart(raw: string): Part {
  const split = raw.search(/\r?\n\r?\n/);
  const head = split < 0 ? raw : raw.slice(0, split);
  const body = split < 0 ? '' : raw.slice(split).replace(/^\r?\n\r?\n/, '');
  const headers = new Map<string, string>();
  for (const line of head.replace(/\r?\n[ \t]+/g, ' ').split(/\r?\n/)) {
    const i = line.indexOf(':');
    if (i > 0) headers.set(line.slice(0, i).trim().toLowerCase(), line.slice(i + 1).trim());
  }
  return { headers, body };
}

/** Walks a MIME tree and returns the decoded text/plain and text/html bodies. */
function bodies(part: Part, out: { text: string; html: string }): void {
  const type = part.headers.get('content-type') ?? 'text/plain';
  const boundary = /boundary="?([^";]+)"?/i.exec(type)?.[1];
  if (/^multipart\//i.test(type) && boundary) {
    for (const chunk of part.body.split(`--${boundary}`).slice(1)) {
      if (chunk.startsWith('--')) break;
      bodies(parsePart(chunk.replace(/^\r?\n/, '')), out);
    }
    return;
  }
  const cte = (part.headers.get('content-transfer-encoding') ?? '7bit').toLowerCase();
  const decoded =
    cte === 'base64'
      ? Buffer.from(part.body.replace(/\s+/g, ''), 'base64').toString('utf8')
      : cte === 'quoted-printable'
        ? decodeQuotedPrintable(part.body)
        : part.body;
  if (/^text\/html/i.test(type)) out.html += decoded;
  else out.text += decoded;
}

/** A real SMTP receiver that keeps every mail it gets, on an ephemeral port unless `port` is given. */
export async function startMailbox(port = 0): Promise<Mailbox> {
  const mails: ReceivedMail[] = [];
  const waiters: Array<() => void> = [];
  const server = new SMTPServer({
    authOptional: true,
    disabledCommands: ['STARTTLS', 'AUTH'],
    logger: false,
    onData(stream, session, callback) {
      const chunks: Buffer[] = [];
      stream.on('data', (c: Buffer) => chunks.push(c));
      stream.on('end', () => {
        if (box.failNext > 0) {
          box.failNext--;
          const permanent = box.failCode >= 500;
          return callback(
            Object.assign(new Error(permanent ? 'mailbox unavailable' : 'try again later'), {
              responseCode: box.failCode,
            }),
          );
        }
        const raw = Buffer.concat(chunks).toString('utf8');
        const top = parsePart(raw);
        const out = { text: '', html: '' };
        bodies(top, out);
        mails.push({
          to: session.envelope.rcptTo.map((r) => r.address.toLowerCase()),
          subject: decodeWords(top.headers.get('subject') ?? ''),
          text: out.text,
          html: out.html,
          messageId: top.headers.get('message-id') ?? '',
          raw,
        });
        waiters.splice(0).forEach((w) => w());
        callback();
      });
    },
  });
  await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
  const bound = (server.server.address() as AddressInfo).port;
  const box: Mailbox = {
    url: `smtp://127.0.0.1:${bound}`,
    mails,
    failNext: 0,
    failCode: 451,
    async waitFor(to, pred = () => true, ms = 10_000) {
      const deadline = Date.now() + ms;
      const match = (m: ReceivedMail) => m.to.includes(to.toLowerCase()) && pred(m);
      for (;;) {
        const found = mails.find(match);
        if (found) return found;
        const left = deadline - Date.now();
        if (left <= 0)
          throw new Error(
            `no mail to ${to} within ${ms} ms; have: ${mails.map((m) => `${m.to.join(',')}: ${m.subject}`).join(' | ')}`,
          );
        await new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, left);
          waiters.push(() => {
            clearTimeout(timer);
            resolve();
          });
        });
      }
    },
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
  return box;
}

/** The `token=` query parameter of the first APP_URL link in a mail. */
export function tokenOf(mail: ReceivedMail): string {
  const m = /[?&]token=([A-Za-z0-9_\-%.~]+)/.exec(mail.text);
  if (!m) throw new Error(`no token link in mail: ${mail.text}`);
  return decodeURIComponent(m[1]);
}

/**
 * Whether `text` holds a one-time token whose stored hash is one of `hashes`: every 43-character
 * base64url window (the shape of randomToken's 32 bytes) is hashed, so no token needs to be known.
 */
export function containsTokenOf(text: string, hashes: string[]): boolean {
  const wanted = new Set(hashes);
  for (const run of text.match(/[A-Za-z0-9_-]{43,}/g) ?? []) {
    for (let i = 0; i + 43 <= run.length; i++) if (wanted.has(sha256(run.slice(i, i + 43)))) return true;
  }
  return false;
}
