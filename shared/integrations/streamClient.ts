import type { Config, StreamConfig } from '../config';
import { HttpError, serviceUnavailable } from '../errors';

/**
 * The client of the Twitch-compatible stream platform (spec §4.25, STREAM_* configuration): the
 * OAuth endpoints under STREAM_AUTH_URL (`/authorize`, `/token`, `/revoke`, `/validate`, as
 * id.twitch.tv/oauth2) and the Helix-style API under STREAM_API_URL. Every call is bounded by
 * STREAM_TIMEOUT_MS; whatever goes wrong upstream becomes a 502 `{error, message}`. Tokens travel
 * only in request bodies and headers: never in a URL, an error message or a log line.
 */

/** 502: the stream platform failed, answered nonsense, or did not answer in time. */
export function badGateway(message: string): HttpError {
  return new HttpError(502, 'BadGateway', message);
}

/** The platform refused an access token (HTTP 401 from the API): the caller may refresh once and retry. */
export class TokenRejected extends Error {
  constructor() {
    super('the stream platform rejected the access token');
    this.name = 'TokenRejected';
  }
}

/** The platform refused a refresh token or an authorization code (HTTP 400/401 from /token). */
export class GrantRejected extends Error {
  constructor(readonly upstreamMessage: string) {
    super('the stream platform refused the grant');
    this.name = 'GrantRejected';
  }
}

export interface TokenSet {
  accessToken: string;
  refreshToken: string | null;
  /** Seconds until the access token expires, as the platform says; null when it does not say. */
  expiresIn: number | null;
  scopes: string[];
}

export interface PlatformUser {
  id: string;
  login: string;
  displayName: string | null;
  profileImageUrl: string | null;
}

export interface ChannelStats {
  followers: number;
  subscribers: number;
  current_viewers: number;
  is_live: boolean;
  stream_title: string | null;
  game_name: string | null;
}

type Json = Record<string, unknown>;

const str = (v: unknown): string | null => (typeof v === 'string' && v !== '' ? v : null);
const int = (v: unknown): number => (typeof v === 'number' && Number.isFinite(v) ? Math.max(0, Math.trunc(v)) : 0);

/** Twitch answers `scope` as an array on /token and as a space-separated string in older examples. */
function scopesOf(v: unknown): string[] {
  if (Array.isArray(v)) return v.filter((s): s is string => typeof s === 'string');
  if (typeof v === 'string') return v.split(' ').filter(Boolean);
  return [];
}

export class StreamClient {
  constructor(
    private readonly cfg: StreamConfig,
    private readonly timeoutMs: number,
  ) {}

  /**
   * Where the user's browser authorises the service (`/authorize`, response_type=code). With
   * `force_verify` the platform always shows its consent screen, also to a user who authorised the
   * service before: a link started by someone else cannot pass silently (docs/integrations.md).
   */
  authorizationUrl(state: string, callbackUrl: string, scopes: string[]): string {
    const q = new URLSearchParams({
      response_type: 'code',
      client_id: this.cfg.clientId,
      redirect_uri: callbackUrl,
      scope: scopes.join(' '),
      state,
      force_verify: 'true',
    });
    return `${this.cfg.authUrl}/authorize?${q.toString()}`;
  }

  /** Authorization code → tokens (`POST /token`, grant_type=authorization_code). */
  exchangeCode(code: string, callbackUrl: string): Promise<TokenSet> {
    return this.token({ grant_type: 'authorization_code', code, redirect_uri: callbackUrl });
  }

  /** Refresh token → new tokens (`POST /token`, grant_type=refresh_token). */
  refresh(refreshToken: string): Promise<TokenSet> {
    return this.token({ grant_type: 'refresh_token', refresh_token: refreshToken });
  }

  /** Revokes an access token (`POST /revoke`). A token the platform no longer knows counts as revoked. */
  async revoke(accessToken: string): Promise<void> {
    const res = await this.call('revoke', `${this.cfg.authUrl}/revoke`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ client_id: this.cfg.clientId, token: accessToken }).toString(),
    });
    if (res.ok || res.status === 400 || res.status === 404) return;
    throw badGateway(`the stream platform refused to revoke the token (HTTP ${res.status})`);
  }

  /** What the platform says about an access token (`GET /validate`, `Authorization: OAuth <token>`). */
  async validate(accessToken: string): Promise<{ clientId: string | null; userId: string | null; scopes: string[] }> {
    const res = await this.call('validate', `${this.cfg.authUrl}/validate`, {
      headers: { authorization: `OAuth ${accessToken}`, accept: 'application/json' },
    });
    const body = await this.json(res, 'validate');
    if (res.status === 401) throw new TokenRejected();
    if (!res.ok) throw badGateway(`the stream platform's validate endpoint failed (HTTP ${res.status})`);
    return { clientId: str(body.client_id), userId: str(body.user_id), scopes: scopesOf(body.scopes) };
  }

  /** The user the access token belongs to (`GET /users` without parameters). */
  async currentUser(accessToken: string): Promise<PlatformUser> {
    const body = await this.helix(accessToken, '/users');
    const u = Array.isArray(body.data) ? (body.data[0] as Json | undefined) : undefined;
    const id = u && str(u.id);
    const login = u && str(u.login);
    if (!u || !id || !login) throw badGateway('the stream platform returned no user for the token');
    return { id, login, displayName: str(u.display_name), profileImageUrl: str(u.profile_image_url) };
  }

  /** Followers, subscribers and the live stream of a broadcaster, in parallel. */
  async stats(accessToken: string, broadcasterId: string): Promise<ChannelStats> {
    const id = encodeURIComponent(broadcasterId);
    const [streams, followers, subscriptions] = await Promise.all([
      this.helix(accessToken, `/streams?user_id=${id}&type=live&first=1`),
      this.helix(accessToken, `/channels/followers?broadcaster_id=${id}&first=1`),
      // Channels that are not affiliates (400) have no subscribers to count; any other refusal
      // (403: the token is not the broadcaster's) is a failure, not a count of 0.
      this.helix(accessToken, `/subscriptions?broadcaster_id=${id}&first=1`, [400]),
    ]);
    const live = Array.isArray(streams.data) ? (streams.data[0] as Json | undefined) : undefined;
    const isLive = !!live && (live.type === undefined || live.type === 'live');
    return {
      followers: int(followers.total),
      subscribers: int(subscriptions.total),
      current_viewers: isLive ? int(live!.viewer_count) : 0,
      is_live: isLive,
      stream_title: isLive ? str(live!.title) : null,
      game_name: isLive ? str(live!.game_name) : null,
    };
  }

  private async token(params: Record<string, string>): Promise<TokenSet> {
    const res = await this.call('token', `${this.cfg.authUrl}/token`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded', accept: 'application/json' },
      body: new URLSearchParams({
        client_id: this.cfg.clientId,
        client_secret: this.cfg.clientSecret,
        ...params,
      }).toString(),
    });
    const body = await this.json(res, 'token');
    if (res.status === 400 || res.status === 401) throw new GrantRejected(str(body.message) ?? `HTTP ${res.status}`);
    if (!res.ok) throw badGateway(`the stream platform's token endpoint failed (HTTP ${res.status})`);
    const accessToken = str(body.access_token);
    if (!accessToken) throw badGateway("the stream platform's token endpoint returned no access token");
    const expiresIn = typeof body.expires_in === 'number' && body.expires_in > 0 ? body.expires_in : null;
    return { accessToken, refreshToken: str(body.refresh_token), expiresIn, scopes: scopesOf(body.scope) };
  }

  /** GET on the API with the user's token; 401 → TokenRejected, `tolerated` statuses → `{}`. */
  private async helix(accessToken: string, path: string, tolerated: number[] = []): Promise<Json> {
    const what = path.split('?')[0];
    const res = await this.call(what, `${this.cfg.apiUrl}${path}`, {
      headers: { authorization: `Bearer ${accessToken}`, 'client-id': this.cfg.clientId, accept: 'application/json' },
    });
    if (res.status === 401) {
      await res.body?.cancel();
      throw new TokenRejected();
    }
    if (tolerated.includes(res.status)) {
      await res.body?.cancel();
      return {};
    }
    if (!res.ok) {
      await res.body?.cancel();
      throw badGateway(`the stream platform's ${what} endpoint failed (HTTP ${res.status})`);
    }
    return this.json(res, what);
  }

  private async json(res: Response, what: string): Promise<Json> {
    let body: unknown;
    try {
      body = await res.json();
    } catch {
      body = undefined;
    }
    if (body && typeof body === 'object' && !Array.isArray(body)) return body as Json;
    if (!res.ok) return {};
    throw badGateway(`the stream platform's ${what} endpoint answered with something other than a JSON object`);
  }

  /** One bounded request: a refused connection or a timeout is a 502 naming the endpoint, never the URL's secrets. */
  private async call(what: string, url: string, init: RequestInit): Promise<Response> {
    try {
      return await fetch(url, { ...init, redirect: 'manual', signal: AbortSignal.timeout(this.timeoutMs) });
    } catch (err) {
      const name = (err as Error)?.name;
      if (name === 'TimeoutError' || name === 'AbortError')
        throw badGateway(`the stream platform's ${what} endpoint did not answer within ${this.timeoutMs} ms`);
      throw badGateway(`the stream platform's ${what} endpoint is unreachable`);
    }
  }
}

/** The configured client, or 503 naming the variables an operator must set. */
export function streamClient(config: Pick<Config, 'stream' | 'streamTimeoutMs'>): StreamClient {
  if (!config.stream)
    throw serviceUnavailable(
      'the stream platform is not configured on this server (STREAM_AUTH_URL, STREAM_API_URL, STREAM_CLIENT_ID, STREAM_CLIENT_SECRET)',
    );
  return new StreamClient(config.stream, config.streamTimeoutMs);
}
