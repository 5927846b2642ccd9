import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { randomBytes } from 'node:crypto';
import type { ExecutionContext } from 'ava';
import { Stack, useStack } from './stack';

/**
 * A local stand-in for a Twitch-compatible stream platform, speaking the wire formats of
 * id.twitch.tv/oauth2 (authorize, token, revoke, validate) and of the Helix API (users, streams,
 * channels/followers, subscriptions: `{data: [...], pagination: {...}, total}`, errors
 * `{error, status, message}`). Tests set its channel data and its failure modes, and read what it
 * was sent.
 */

export interface FakeUser {
  id: string;
  login: string;
  display_name: string;
  profile_image_url: string;
  followers: number;
  subscribers: number;
  stream: { title: string; game_name: string; viewer_count: number } | null;
}

export interface FakeRequest {
  method: string;
  path: string;
  url: string;
  headers: http.IncomingHttpHeaders;
  body: string;
}

interface Grant {
  userId: string;
  scopes: string[];
  redirectUri: string;
}

export interface FakeStreamPlatform {
  authUrl: string;
  apiUrl: string;
  clientId: string;
  clientSecret: string;
  /** The env a stack needs to use this platform. */
  env: Record<string, string>;
  users: Map<string, FakeUser>;
  /** The user who consents at /authorize. */
  consentingUser: string;
  /** expires_in of the tokens it issues. */
  expiresIn: number;
  /** Every request received, in order. */
  requests: FakeRequest[];
  /** Every access and refresh token it ever issued (to look for them where they must not be). */
  issued: string[];
  /** Live access tokens → grant. */
  accessTokens: Map<string, Grant>;
  /** Live refresh tokens → grant. */
  refreshTokens: Map<string, Grant>;
  /** Revoked access tokens. */
  revoked: string[];
  /** Per path (e.g. `/helix/streams`): answer this status (with a Twitch-shaped error) instead. */
  failWith: Map<string, number>;
  /** Paths that never answer (for timeouts). */
  hang: Set<string>;
  /** Simulates the user consenting: follows authorization_url like the browser, returns the redirect's code and state. */
  consent(authorizationUrl: string): Promise<{ location: URL; code: string | null; state: string | null }>;
  /** Makes every live access token invalid (as if expired), as Helix then answers 401. */
  expireAccessTokens(): void;
  close(): Promise<void>;
}

const helixError = (status: number, message: string) => ({
  error:
    status === 401
      ? 'Unauthorized'
      : status === 403
        ? 'Forbidden'
        : status >= 500
          ? 'Internal Server Error'
          : 'Bad Request',
  status,
  message,
});

export async function startFakeStreamPlatform(): Promise<FakeStreamPlatform> {
  const clientId = `cid${randomBytes(8).toString('hex')}`;
  const clientSecret = `csecret${randomBytes(12).toString('hex')}`;
  const codes = new Map<string, Grant>();
  const hanging: http.ServerResponse[] = [];
  const token = () =>
    randomBytes(15)
      .toString('base64url')
      .toLowerCase()
      .replace(/[^a-z0-9]/g, 'x');

  const fake = {
    clientId,
    clientSecret,
    users: new Map<string, FakeUser>(),
    consentingUser: '',
    expiresIn: 14_400,
    requests: [] as FakeRequest[],
    issued: [] as string[],
    accessTokens: new Map<string, Grant>(),
    refreshTokens: new Map<string, Grant>(),
    revoked: [] as string[],
    failWith: new Map<string, number>(),
    hang: new Set<string>(),
  } as FakeStreamPlatform;

  function issue(grant: Grant) {
    const access = token();
    const refresh = `${token()}${token()}`;
    fake.accessTokens.set(access, grant);
    fake.refreshTokens.set(refresh, grant);
    fake.issued.push(access, refresh);
    return {
      access_token: access,
      expires_in: fake.expiresIn,
      refresh_token: refresh,
      scope: grant.scopes,
      token_type: 'bearer',
    };
  }

  function send(res: http.ServerResponse, status: number, body?: unknown) {
    res.writeHead(status, body === undefined ? {} : { 'content-type': 'application/json' });
    res.end(body === undefined ? undefined : JSON.stringify(body));
  }

  function bearer(req: http.IncomingMessage, scheme: string): Grant | undefined {
    const h = req.headers.authorization ?? '';
    return h.startsWith(`${scheme} `) ? fake.accessTokens.get(h.slice(scheme.length + 1)) : undefined;
  }

  function oauth(req: http.IncomingMessage, res: http.ServerResponse, path: string, url: URL, body: URLSearchParams) {
    if (path === '/oauth2/authorize') {
      const redirect = url.searchParams.get('redirect_uri');
      if (
        url.searchParams.get('client_id') !== clientId ||
        !redirect ||
        url.searchParams.get('response_type') !== 'code'
      )
        return send(res, 400, { status: 400, message: 'invalid client or redirect' });
      const code = token();
      codes.set(code, {
        userId: fake.consentingUser,
        scopes: (url.searchParams.get('scope') ?? '').split(' ').filter(Boolean),
        redirectUri: redirect,
      });
      const to = new URL(redirect);
      to.searchParams.set('code', code);
      to.searchParams.set('scope', url.searchParams.get('scope') ?? '');
      to.searchParams.set('state', url.searchParams.get('state') ?? '');
      res.writeHead(302, { location: to.toString() });
      return res.end();
    }
    if (path === '/oauth2/token' && req.method === 'POST') {
      if (body.get('client_id') !== clientId || body.get('client_secret') !== clientSecret)
        return send(res, 403, { status: 403, message: 'invalid client secret' });
      if (body.get('grant_type') === 'authorization_code') {
        const grant = codes.get(body.get('code') ?? '');
        codes.delete(body.get('code') ?? '');
        if (!grant || grant.redirectUri !== body.get('redirect_uri'))
          return send(res, 400, { status: 400, message: 'Invalid authorization code' });
        return send(res, 200, issue(grant));
      }
      if (body.get('grant_type') === 'refresh_token') {
        const old = body.get('refresh_token') ?? '';
        const grant = fake.refreshTokens.get(old);
        if (!grant) return send(res, 400, { status: 400, message: 'Invalid refresh token' });
        fake.refreshTokens.delete(old);
        return send(res, 200, issue(grant));
      }
      return send(res, 400, { status: 400, message: 'Invalid grant type' });
    }
    if (path === '/oauth2/revoke' && req.method === 'POST') {
      const t = body.get('token') ?? '';
      if (body.get('client_id') !== clientId) return send(res, 400, { status: 400, message: 'Invalid client id' });
      const grant = fake.accessTokens.get(t);
      if (!grant) return send(res, 400, { status: 400, message: 'Invalid token' });
      fake.accessTokens.delete(t);
      for (const [r, g] of fake.refreshTokens) if (g === grant) fake.refreshTokens.delete(r);
      fake.revoked.push(t);
      return send(res, 200);
    }
    if (path === '/oauth2/validate') {
      const grant = bearer(req, 'OAuth');
      if (!grant) return send(res, 401, { status: 401, message: 'invalid access token' });
      const u = fake.users.get(grant.userId)!;
      return send(res, 200, {
        client_id: clientId,
        login: u.login,
        scopes: grant.scopes,
        user_id: u.id,
        expires_in: fake.expiresIn,
      });
    }
    return send(res, 404, { status: 404, message: 'not found' });
  }

  function helix(req: http.IncomingMessage, res: http.ServerResponse, path: string, url: URL) {
    if (req.headers['client-id'] !== clientId)
      return send(res, 401, helixError(401, 'Client ID and OAuth token do not match'));
    const grant = bearer(req, 'Bearer');
    if (!grant) return send(res, 401, helixError(401, 'Invalid OAuth token'));
    const me = fake.users.get(grant.userId)!;
    const user = (id: string | null) => (id ? [...fake.users.values()].find((u) => u.id === id) : undefined);
    if (path === '/helix/users') {
      const { followers: _f, subscribers: _s, stream: _st, ...pub } = me;
      return send(res, 200, {
        data: [
          {
            ...pub,
            type: '',
            broadcaster_type: 'affiliate',
            description: '',
            offline_image_url: '',
            view_count: 0,
            created_at: '2020-01-01T00:00:00Z',
          },
        ],
      });
    }
    if (path === '/helix/streams') {
      const u = user(url.searchParams.get('user_id'));
      const live = u?.stream
        ? [
            {
              id: '40952121085',
              user_id: u.id,
              user_login: u.login,
              user_name: u.display_name,
              game_id: '509658',
              game_name: u.stream.game_name,
              type: 'live',
              title: u.stream.title,
              viewer_count: u.stream.viewer_count,
              started_at: '2026-11-24T04:00:00Z',
              language: 'en',
              thumbnail_url: '',
              tag_ids: [],
              tags: [],
              is_mature: false,
            },
          ]
        : [];
      return send(res, 200, { data: live, pagination: {} });
    }
    if (path === '/helix/channels/followers') {
      const u = user(url.searchParams.get('broadcaster_id'));
      if (!u) return send(res, 400, helixError(400, 'Missing required parameter "broadcaster_id"'));
      return send(res, 200, { total: u.followers, data: [], pagination: {} });
    }
    if (path === '/helix/subscriptions') {
      const u = user(url.searchParams.get('broadcaster_id'));
      if (!u || u.id !== me.id)
        return send(res, 403, helixError(403, 'broadcaster_id must match the User ID in the token'));
      if (!grant.scopes.includes('channel:read:subscriptions'))
        return send(res, 401, helixError(401, 'Missing scope: channel:read:subscriptions'));
      return send(res, 200, { data: [], pagination: {}, total: u.subscribers, points: u.subscribers });
    }
    return send(res, 404, helixError(404, 'Not Found'));
  }

  const server = http.createServer((req, res) => {
    let raw = '';
    req.on('data', (d: Buffer) => (raw += d.toString()));
    req.on('end', () => {
      const url = new URL(req.url ?? '/', 'http://fake');
      const path = url.pathname;
      fake.requests.push({ method: req.method ?? 'GET', path, url: req.url ?? '', headers: req.headers, body: raw });
      if (fake.hang.has(path)) return void hanging.push(res);
      const failing = fake.failWith.get(path);
      if (failing) return send(res, failing, helixError(failing, 'simulated failure'));
      if (path.startsWith('/oauth2/')) return oauth(req, res, path, url, new URLSearchParams(raw));
      if (path.startsWith('/helix/')) return helix(req, res, path, url);
      send(res, 404, { status: 404, message: 'not found' });
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  fake.authUrl = `${base}/oauth2`;
  fake.apiUrl = `${base}/helix`;
  fake.env = {
    STREAM_AUTH_URL: fake.authUrl,
    STREAM_API_URL: fake.apiUrl,
    STREAM_CLIENT_ID: clientId,
    STREAM_CLIENT_SECRET: clientSecret,
  };
  fake.consent = async (authorizationUrl: string) => {
    const res = await fetch(authorizationUrl, { redirect: 'manual' });
    const location = new URL(res.headers.get('location') ?? 'http://invalid/');
    return { location, code: location.searchParams.get('code'), state: location.searchParams.get('state') };
  };
  fake.expireAccessTokens = () => fake.accessTokens.clear();
  fake.close = async () => {
    for (const r of hanging.splice(0)) r.destroy();
    server.closeAllConnections();
    await new Promise<void>((r) => server.close(() => r()));
  };
  return fake;
}

let n = 0;
/** A platform user with channel data. */
export function fakeUser(overrides: Partial<FakeUser> = {}): FakeUser {
  n++;
  const id = String(100_000 + n * 7 + Math.floor(Math.random() * 1000) * 10_000);
  return {
    id,
    login: `streamer${n}`,
    display_name: `Streamer${n}`,
    profile_image_url: `https://static-cdn.example.test/${id}.png`,
    followers: 0,
    subscribers: 0,
    stream: null,
    ...overrides,
  };
}

/**
 * A file's stack configured for a fake stream platform started before it (and closed after):
 * `stack()` and `fake()` for the tests. `env` adds settings of the file's own.
 */
export function useStreamPlatformStack(
  test: {
    before: (fn: (t: ExecutionContext) => Promise<void>) => void;
    after: { always: (fn: () => Promise<void>) => void };
  },
  env: Record<string, string> = {},
): { stack: () => Stack; fake: () => FakeStreamPlatform } {
  let fake: FakeStreamPlatform | undefined;
  const settings: Record<string, string> = { STREAM_TIMEOUT_MS: '2000', RATE_LIMIT_ANONYMOUS: '100000', ...env };
  test.before(async () => {
    fake = await startFakeStreamPlatform();
    Object.assign(settings, fake.env);
  });
  const stack = useStack(test, { env: settings });
  test.after.always(async () => {
    await fake?.close();
  });
  return {
    stack,
    fake: () => {
      if (!fake) throw new Error('fake stream platform not started');
      return fake;
    },
  };
}
