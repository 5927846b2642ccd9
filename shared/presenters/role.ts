import type { Permission } from '../models/Permission';
import type { Role } from '../models/Role';
import { iso } from './iso';

/** Role (spec §2). */
export function presentRole(r: Role) {
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

/** Permission (spec §2). */
export function presentPermission(p: Permission) {
  return {
    id: p.id,
    resource: p.resource,
    action: p.action,
    description: p.description,
    created_at: iso(p.created_at),
    updated_at: iso(p.updated_at),
  };
}
