import type { Knex } from 'knex';
import type Koa from 'koa';
import type { Context } from 'koa';
import { isUtf8 } from 'node:buffer';
import type { EmailRequest } from '../shared/commands/emailFlows';
import { safeEqual } from '../shared/crypto';
import { notFound } from '../shared/errors';
import { ipAddressOf } from '../shared/ipAddress';
import { User } from '../shared/models/User';
import { rowById } from '../shared/rowLoader';
import { authorizeSelf, can, Principal, subjects } from '../shared/policies';
import { z, isUuid } from '../shared/zod';
import type { AppContext } from './routing';

/** A user id in a path: a UUID, or `me` for the caller's own user. */
export const zUserRef = () =>
  z
    .string()
    .refine((v) => v === 'me' || isUuid(v), { message: 'must be a UUID or me' })
    // Lower-cased as zUuid is (see there): a ban by upper-case id must reach the cached credentials.
    .transform((v) => v.toLowerCase())
    .openapi({ description: 'User id (UUID) or `me`' });

export const userIdParam = z.object({ id: zUserRef() });

/** The user a principal acts for, or 403 for credentials without one (system key, ownerless keys). */
export function requireActingUser(p: Principal): string {
  return authorizeSelf(p);
}

/** Turns a path user ref into a user id (`me` → the caller's user). */
export function resolveUserRef(ctx: AppContext, ref: string): string {
  return ref === 'me' ? requireActingUser(ctx.state.principal) : ref;
}

/**
 * Loads a user or answers 404; soft-deleted users are found only with `includeDeleted`. A plain
 * read by id goes through findOr404; live-only reads and `forUpdate` keep the query builder.
 */
export async function loadUser(
  db: Knex,
  id: string,
  opts: { includeDeleted?: boolean; forUpdate?: boolean } = {},
): Promise<User> {
  if (!opts.forUpdate && !(db as Knex.Transaction).isTransaction) {
    const user = await rowById(User, db).load(id);
    if (!user || (!opts.includeDeleted && user.deleted_at)) throw notFound('user');
    return user;
  }
  const q = User.query(db).findById(id);
  if (!opts.includeDeleted) q.whereNull('deleted_at');
  if (opts.forUpdate) q.forUpdate();
  const user = await q;
  if (!user) throw notFound('user');
  return user;
}

/**
 * Whether the request carries the configured X-Internal-Token: a server-side web app calling
 * anonymously on its users' behalf (spec §8: it skips the anonymous limit).
 */
export function carriesInternalToken(ctx: Pick<Context, 'get'>, internalToken: string): boolean {
  return internalToken !== '' && safeEqual(ctx.get('x-internal-token'), internalToken);
}

/**
 * The client's address for throttling. The system key is the first-party web app relaying a user's
 * request, and so is an anonymous request with X-Internal-Token (a server-side web app): their own
 * IP says nothing about the user, so the forwarded address is used, and without one only the
 * per-account counter applies (counting the web app's own address would let anyone exhaust it for
 * every user behind it).
 */
export function clientIp(ctx: AppContext): string | null {
  if (
    can(ctx.state.principal, 'forwardClientAddress', subjects.relay()) ||
    (ctx.state.principal.kind === 'anonymous' && carriesInternalToken(ctx, ctx.services.config.internalToken))
  ) {
    // An address, or none: the value is stored and geolocated, and the column holds an address.
    return ipAddressOf(ctx.get('x-forwarded-for').split(',')[0]?.trim());
  }
  return ctx.ip;
}

const checkedIp = Symbol('checkedIp');
type CheckedRequest = Koa.Request & { [checkedIp]?: string };

/**
 * Makes `ctx.ip` an address. Behind trusted proxies (TRUST_PROXY) Koa takes it from
 * X-Forwarded-For as written, and it is stored (sessions, audit events), geolocated and counted
 * (rate limits, sign-in counters). An entry that is not an address (`not-an-ip`, 100 characters
 * no column holds) was appended by no proxy that writes what it saw, so it is not believed: the
 * peer's own address is used, as without a proxy, and a client rotating junk stays in one bucket.
 * An IPv6 zone id is dropped (ipAddressOf). Defined on `app.request`, every request's prototype,
 * so every middleware, route and log line reads the same address.
 */
export function believeOnlyAddresses(app: Pick<Koa, 'request'>): void {
  Object.defineProperty(app.request, 'ip', {
    configurable: true,
    get(this: CheckedRequest): string {
      return (this[checkedIp] ??= ipAddressOf(this.ips[0]) ?? ipAddressOf(this.socket.remoteAddress) ?? '');
    },
    set(this: CheckedRequest, ip: string) {
      this[checkedIp] = ip;
    },
  });
}

/**
 * A request header's value as text. Node reads header bytes as latin1, one character per byte:
 * a client that sent UTF-8 (a user agent or app name with `ü`) would be stored as `Ã¼`. Bytes
 * that form UTF-8 are read as such; anything else stays as Node read it. Empty or absent: null.
 */
export function headerText(ctx: Pick<Context, 'get'>, name: string): string | null {
  const v = ctx.get(name);
  if (!v) return null;
  if (!/[^ -~\t]/.test(v)) return v;
  const bytes = Buffer.from(v, 'latin1');
  return isUtf8(bytes) ? bytes.toString('utf8') : v;
}

/**
 * Where an anonymous account request (sign-in, registration, reset, mailed links) comes from: the
 * client's address, user agent and preferred language. No actor: the account's user is named by
 * the command (a relaying system key is not the one acting).
 */
export const authRequestMeta = (ctx: AppContext): EmailRequest => ({
  ipAddress: clientIp(ctx) ?? ctx.ip,
  userAgent: headerText(ctx, 'user-agent'),
  acceptLanguage: ctx.get('accept-language') || null,
});
