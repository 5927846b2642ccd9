import type { Permission } from '../models/Permission';
import type { Role } from '../models/Role';
import { z } from '../zod';
import { iso } from './iso';

/** Role (spec §2). */
export const roleSchema = z.object({
  id: z.string(),
  name: z.string(),
  description: z.string().nullable(),
  is_system: z.boolean(),
  requires_two_factor: z.boolean(),
  created_at: z.string(),
  updated_at: z.string(),
});

/** Permission (spec §2). */
export const permissionSchema = z.object({
  id: z.string().uuid(),
  resource: z.string(),
  action: z.string(),
  description: z.string().nullable(),
  created_at: z.string(),
  updated_at: z.string(),
});

/** A role as every listing and read shows it. */
export function presentRole(r: Role): z.infer<typeof roleSchema> {
  return {
    id: r.id,
    name: r.name,
    description: r.description,
    is_system: r.is_system,
    requires_two_factor: r.requires_two_factor,
    created_at: iso(r.created_at),
    updated_at: iso(r.updated_at),
  };
}

/** A permission as every listing and read shows it. */
export function presentPermission(p: Permission): z.infer<typeof permissionSchema> {
  return {
    id: p.id,
    resource: p.resource,
    action: p.action,
    description: p.description,
    created_at: iso(p.created_at),
    updated_at: iso(p.updated_at),
  };
}
