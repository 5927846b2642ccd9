import type { Role } from '../models/Role';
import { z } from '../zod';

/** A role as listed on a user (GET/POST /v1/users/{id}/roles): id, name and description only. */
export const userRoleSchema = z.object({
  id: z.string(),
  name: z.string(),
  description: z.string().nullable(),
});

export function presentUserRole(r: Pick<Role, 'id' | 'name' | 'description'>): z.infer<typeof userRoleSchema> {
  return { id: r.id, name: r.name, description: r.description };
}
