import type { Knex } from 'knex';
import http from 'node:http';
import type net from 'node:net';
import { gpsBody } from './tracking';
import { createKey, createUser } from './factories';

/** What became of one request: its status and Connection header, or the error code that ended it. */
export interface Outcome {
  method: string;
  path: string;
  sentAt: number;
  doneAt?: number;
  /** Client socket the request went out on (numbered in order of first use). */
  socket: number;
  /** device_id of a POSTed point, to find it in the database. */
  marker?: string;
  status?: number;
  connection?: string;
  body?: string;
  error?: string;
}

const socketIds = new WeakMap<net.Socket, number>();
let nextSocketId = 0;

/** One request over `agent`; never rejects: a failure is recorded as the error's code. */
export function send(
  agent: http.Agent,
  port: number,
  key: string,
  method: string,
  path: string,
  body?: unknown,
  marker?: string,
): Promise<Outcome> {
  const payload = body === undefined ? undefined : JSON.stringify(body);
  const o: Outcome = { method, path, sentAt: Date.now(), socket: -1, marker };
  return new Promise((resolve) => {
    const done = (err?: NodeJS.ErrnoException) => {
      if (o.doneAt) return;
      o.doneAt = Date.now();
      if (err) o.error = err.code ?? err.message;
      resolve(o);
    };
    const headers: Record<string, string | number> = { authorization: `Bearer ${key}` };
    if (payload !== undefined)
      Object.assign(headers, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(payload) });
    const req = http.request({ host: '127.0.0.1', port, method, path, agent, headers }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (text += c));
      res.on('error', done);
      res.on('aborted', () => done(Object.assign(new Error('response aborted'), { code: 'ABORTED' })));
      res.on('end', () => {
        o.status = res.statusCode;
        o.connection = res.headers.connection;
        o.body = text;
        done();
      });
    });
    req.on('socket', (s: net.Socket) => {
      if (!socketIds.has(s)) socketIds.set(s, nextSocketId++);
      o.socket = socketIds.get(s)!;
    });
    req.on('error', done);
    req.end(payload);
  });
}

/** An API key (gps:read, gps:write) of a new developer user: what a tracker posting points holds. */
export async function loadKey(db: Knex): Promise<string> {
  const dev = await createUser(db, { roles: ['role_developer'] });
  return (await createKey({ userId: dev.id, scopes: ['gps:read', 'gps:write'] })).key;
}

export interface Load {
  outcomes: Outcome[];
  /** Stops the loops after their current request and closes the agent's sockets. */
  stop(): Promise<void>;
}

/**
 * Steady keep-alive load on the api at `port`: `loops` clients, each sending its next request as soon
 * as the previous one is answered, alternating POST /v1/gps (device_id `${prefix}<n>`) and GET /v1/gps.
 * `key` is an API key with gps:read and gps:write.
 */
export function startLoad(port: number, key: string, opts: { loops: number; prefix: string }): Load {
  const agent = new http.Agent({ keepAlive: true, maxSockets: opts.loops });
  const outcomes: Outcome[] = [];
  let stopped = false;
  let seq = 0;
  const loop = async () => {
    while (!stopped) {
      const n = seq++;
      const marker = `${opts.prefix}${n}`;
      const o =
        n % 2 === 0
          ? await send(agent, port, key, 'POST', '/v1/gps', gpsBody({ device_id: marker }), marker)
          : await send(agent, port, key, 'GET', '/v1/gps?limit=1');
      outcomes.push(o);
      // With no listener left every attempt is refused at once: do not spin.
      if (o.error) await new Promise((r) => setTimeout(r, 50));
    }
  };
  const loops = Array.from({ length: opts.loops }, loop);
  return {
    outcomes,
    async stop() {
      stopped = true;
      await Promise.all(loops);
      agent.destroy();
    },
  };
}

/** One line per outcome, for assertion messages. */
export const describeOutcome = (o: Outcome) =>
  `${o.method} ${o.path} sent ${o.sentAt} on socket ${o.socket}: ${o.error ?? o.status}`;
