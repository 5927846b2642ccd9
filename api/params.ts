import type { Knex } from 'knex';
import { forbidden, notFound } from '../shared/errors';
import { User } from '../shared/models/User';
import { actingUserId, Principal } from '../shared/policies';
import { z, isUuid } from '../shared/zod';
import type { AppContext } from './routing';


/** A user id in a path: a UUID, or `me` for the caller's own user. */
export const zUserRef = () =>
  z
    .string()
    .refine((v) => v === 'me' || isUuid(v), { message: 'must be a UUID or me' })
    .openapi({ description: 'User id (UUID) or `me`' });

export const userIdParam = z.object({ id: zUserRef() });

/** The user a principal acts for, or 403 for credentials without one (system key, ownerless keys). */
export function requireActingUser(p: Principal): string {
  const id = actingUserId(p);
  if (!id) throw forbidden('this credential does not act for a user');
  return id;
}

/** Turns a path user ref into a user id (`me` → the caller's user). */
export function resolveUserRef(ctx: AppContext, ref: string): string {
  return ref === 'me' ? requireActingUser(ctx.state.principal) : ref;
}

/** Loads a user or answers 404; soft-deleted users are found only with `includeDeleted`. */
export async function loadUser(db: Knex, id: string, opts: { includeDeleted?: boolean; forUpdate?: boolean } = {}): Promise<User> {
  const q = User.query(db).findById(id);
  if (!opts.includeDeleted) q.whereNull('deleted_at');
  if (opts.forUpdate) q.forUpdate();
  const user = await q;
  if (!user) throw notFound('user');
  return user;
}
