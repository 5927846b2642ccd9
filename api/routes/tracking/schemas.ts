import { z, zFinite } from '../../../shared/zod';

/**
 * Request field builders shared by the tracking routers (GPS, devices, trips, locations, geofences,
 * trip categories, trip templates), so each field is validated the same way everywhere. Response
 * schemas live with their presenters (shared/presenters).
 */

export const zName = (max = 255) => z.string({ invalid_type_error: 'must be a string' }).trim().min(1, 'must not be empty').max(max);
export const zText = (max = 10_000) => z.string({ invalid_type_error: 'must be a string' }).max(max).nullable().optional();
export const zLatitude = () => zFinite().min(-90, 'must be between -90 and 90').max(90, 'must be between -90 and 90');
export const zLongitude = () => zFinite().min(-180, 'must be between -180 and 180').max(180, 'must be between -180 and 180');
export const zTags = () => z.array(z.string().trim().min(1).max(100)).max(100).transform((t) => [...new Set(t)]);
export const zWeight = () => zFinite().min(0, 'must be >= 0');

/** Standard error documentation for the tracking routes. */
export const errors = {
  400: { description: 'Invalid input; the message names the field' },
  401: { description: 'Missing or invalid credentials' },
  403: { description: 'Missing permission' },
  404: { description: 'Not found' },
};
