/**
 * The permission catalogue (every resource:action the spec names) and the seven default roles
 * with their permission sets (spec §2 Role, §5.2-5.3). The seed writes exactly this.
 */
export const PERMISSION_CATALOGUE: Record<string, { actions: string[]; description: string }> = {
  '*': { actions: ['*'], description: 'Everything (super admin)' },
  admin: { actions: ['read'], description: 'Administrative channels and views' },
  gps: { actions: ['read', 'write', 'delete'], description: 'GPS points' },
  devices: { actions: ['read', 'write', 'delete'], description: 'Tracking devices' },
  trips: { actions: ['read', 'write', 'delete'], description: 'Trips and trip templates' },
  locations: { actions: ['read', 'write', 'delete'], description: 'Locations and contacts' },
  geofences: { actions: ['read', 'write', 'delete'], description: 'Geofences' },
  trip_categories: { actions: ['read', 'write', 'delete'], description: 'Trip categories' },
  settings: { actions: ['read', 'write', 'delete'], description: 'Settings and system config' },
  pegel: { actions: ['read'], description: 'Water-level stations' },
  users: { actions: ['read', 'write', 'delete', 'ban'], description: 'User accounts' },
  two_factor: { actions: ['read', 'write', 'manage'], description: 'Two-factor authentication' },
  roles: { actions: ['read', 'write', 'delete'], description: 'Roles' },
  permissions: { actions: ['read', 'write'], description: 'Permissions' },
  api_keys: { actions: ['read', 'write', 'delete'], description: 'API keys' },
  oauth_clients: { actions: ['read', 'write', 'delete'], description: 'OAuth client applications (all owners)' },
  audit: { actions: ['read', 'write'], description: 'Audit log' },
  chat: { actions: ['read', 'edit', 'sync', 'delete', 'guild.sync'], description: 'Chat bot management' },
  integrations: { actions: ['read', 'write'], description: 'Stream platform integrations' },
};

/** Every permission string of the catalogue, e.g. `gps:read`. */
export const ALL_PERMISSIONS: string[] = Object.entries(PERMISSION_CATALOGUE).flatMap(([resource, { actions }]) =>
  actions.map((action) => `${resource}:${action}`),
);

const readAll = ALL_PERMISSIONS.filter((p) => p.endsWith(':read') && p !== 'admin:read');

/**
 * What every signed-in user holds: self-service only (their own 2FA, API keys and integrations).
 * Tracking data (GPS positions, devices, trips…) is never readable just by signing up: it comes with
 * roles an administrator grants (Developer, API Read Only, custom roles).
 */
const SELF_SERVICE_PERMISSIONS = [
  'two_factor:read',
  'two_factor:write',
  'api_keys:read',
  'api_keys:write',
  'api_keys:delete',
  'integrations:read',
  'integrations:write',
];

/** Tracking reads, for the roles that work with tracking data. */
const trackingReads = [
  'gps:read',
  'devices:read',
  'trips:read',
  'locations:read',
  'geofences:read',
  'trip_categories:read',
  'pegel:read',
];

const signedInUser = [...SELF_SERVICE_PERMISSIONS, ...trackingReads];

export interface DefaultRole {
  id: string;
  name: string;
  description: string;
  permissions: string[];
}

export const DEFAULT_ROLES: DefaultRole[] = [
  { id: 'role_admin', name: 'Admin', description: 'Full access to everything', permissions: ['*:*'] },
  { id: 'role_user', name: 'User', description: 'A signed-in user', permissions: SELF_SERVICE_PERMISSIONS },
  {
    id: 'role_moderator',
    name: 'Moderator',
    description: 'Moderates users and the chat bot',
    permissions: [
      ...signedInUser,
      'users:read',
      'users:ban',
      'audit:read',
      'chat:read',
      'chat:edit',
      'chat:sync',
      'chat:guild.sync',
    ],
  },
  {
    id: 'role_developer',
    name: 'Developer',
    description: 'Builds on the API: tracking writes, roles and permissions read',
    permissions: [
      ...signedInUser,
      'gps:write',
      'devices:write',
      'trips:write',
      'locations:write',
      'geofences:write',
      'trip_categories:write',
      'roles:read',
      'permissions:read',
      'settings:read',
    ],
  },
  {
    id: 'role_api_read_only',
    name: 'API Read Only',
    description: 'Read-only API access: GPS data, users, roles, public endpoints',
    permissions: readAll.filter((p) => p !== 'audit:read' && p !== 'oauth_clients:read'),
  },
  {
    id: 'role_api_full_access',
    name: 'API Full Access',
    description: 'Create, update and delete all resources (no administration)',
    permissions: ALL_PERMISSIONS.filter((p) => p !== '*:*' && p !== 'admin:read' && p !== 'two_factor:manage'),
  },
  { id: 'role_system', name: 'System', description: 'Internal system principal', permissions: ['*:*'] },
];

export const DEFAULT_USER_ROLE_ID = 'role_user';
