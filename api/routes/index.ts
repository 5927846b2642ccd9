import type Router from '@koa/router';
import type { AppState } from '../routing';
import type { ApiServices } from '../services';
import { healthRoutes } from './health';
import { infoRoutes } from './info';
import { openApiRoutes } from './openapi';
import { sessionRoutes } from './sessions';
import { deviceRoutes } from './tracking/devices';
import { geofenceRoutes } from './tracking/geofences';
import { gpsRoutes } from './tracking/gps';
import { locationRoutes } from './tracking/locations';
import { tripCategoryRoutes } from './tracking/tripCategories';
import { tripRoutes } from './tracking/trips';
import { tripTemplateRoutes } from './tracking/tripTemplates';
import { wsTicketRoutes } from './wsTicket';
import { apiKeyRoutes } from './apiKeys';
import { internalAuditRoutes } from './internalAudit';
import { oauthClientRoutes } from './oauthClients';
import { oauthProviderRoutes } from './oauthProvider';
import { roleRoutes } from './roles';
import { userRoutes } from './users';
import { userEmailRoutes } from './userEmail';
import { platformAccountRoutes } from './platformAccounts';
import { userSessionRoutes } from './userSessions';
import { banRoutes } from './bans';
import { adminUserRoutes } from './adminUsers';
import { authFlowRoutes } from './authFlows';
import { emailPageRoutes } from './emailPages';
import { platformRoutes } from './platforms';
import { twoFactorRoutes } from './twoFactor';
import { settingRoutes } from './settings';
import { pegelRoutes } from './pegel';
import { dataExportRoutes } from './dataExport';
import { auditRoutes } from './audit';
import { integrationConnectRoutes } from './integrationConnect';
import { integrationRoutes } from './integrations';
import { queueDashboardRoutes } from './queueDashboard';
import { chatRoutes } from './chat';

type ApiRouter = Router<AppState, { services: ApiServices }>;

/** Every REST router module, in mounting order. Add a resource by adding its function here. */
export const routeModules: Array<(router: ApiRouter) => void> = [
  healthRoutes,
  infoRoutes,
  openApiRoutes,
  sessionRoutes,
  wsTicketRoutes,
  roleRoutes,
  apiKeyRoutes,
  oauthClientRoutes,
  oauthProviderRoutes,
  internalAuditRoutes,
  gpsRoutes,
  deviceRoutes,
  tripRoutes,
  locationRoutes,
  geofenceRoutes,
  tripCategoryRoutes,
  tripTemplateRoutes,
  userRoutes,
  userEmailRoutes,
  platformAccountRoutes,
  userSessionRoutes,
  banRoutes,
  adminUserRoutes,
  authFlowRoutes,
  emailPageRoutes,
  platformRoutes,
  twoFactorRoutes,
  settingRoutes,
  pegelRoutes,
  dataExportRoutes,
  auditRoutes,
  integrationConnectRoutes,
  integrationRoutes,
  queueDashboardRoutes,
  chatRoutes,
];
