import { badRequest } from '../errors';
import type { Trip, TripStatus } from '../models/Trip';

export const TRIP_STATUSES = ['draft', 'active', 'paused', 'completed'] as const satisfies readonly TripStatus[];

/** Spec §3: the only five transitions. Everything else (the same status included) is a 400. */
const TRIP_TRANSITIONS: Readonly<Record<TripStatus, readonly TripStatus[]>> = {
  draft: ['active'],
  active: ['paused', 'completed'],
  paused: ['active', 'completed'],
  completed: [],
};

/** Whether `from → to` is one of the allowed transitions. */
function canTransition(from: TripStatus, to: TripStatus): boolean {
  return TRIP_TRANSITIONS[from].includes(to);
}

/** Statuses in which a trip may be deleted (spec §3; 409 otherwise). */
export function canDeleteTrip(status: TripStatus): boolean {
  return status === 'draft' || status === 'completed';
}

/**
 * The columns a transition changes besides `status`: started_at when a draft starts, ended_at on
 * completion, both set to `now` (a Date, or a SQL clock expression). Throws 400 for a transition
 * the table does not allow.
 */
export function transitionPatch<T = Date>(
  trip: Pick<Trip, 'status'>,
  to: TripStatus,
  now: T,
): { status: TripStatus; started_at?: T; ended_at?: T } {
  if (!canTransition(trip.status, to)) {
    const allowed = TRIP_TRANSITIONS[trip.status];
    throw badRequest(
      `status: invalid transition from ${trip.status} to ${to}` +
        (allowed.length ? ` (allowed: ${allowed.join(', ')})` : ' (a completed trip is final)'),
    );
  }
  const patch: { status: TripStatus; started_at?: T; ended_at?: T } = { status: to };
  if (trip.status === 'draft' && to === 'active') patch.started_at = now;
  if (to === 'completed') patch.ended_at = now;
  return patch;
}
