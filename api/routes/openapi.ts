import Router from '@koa/router';
import { OpenApiGeneratorV31 } from '@asteasolutions/zod-to-openapi';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { notFound } from '../../shared/errors';
import { openApiRegistry } from '../../shared/zod';
import type { AppState } from '../routing';
import type { ApiServices } from '../services';

let cached: unknown;

/** The OpenAPI 3.1 document, generated once from the routes' own zod schemas. */
function openApiDocument(version: string): unknown {
  if (!cached) {
    openApiRegistry.registerComponent('securitySchemes', 'bearerAuth', {
      type: 'http',
      scheme: 'bearer',
      description: 'Session token, OAuth access token, API key or system key',
    });
    cached = new OpenApiGeneratorV31(openApiRegistry.definitions).generateDocument({
      openapi: '3.1.0',
      info: {
        title: 'Service API',
        version,
        description: 'Accounts, access control, tracking and real-time API. Errors are {error, message}.',
      },
      servers: [{ url: '/' }],
    });
  }
  return cached;
}

const SWAGGER_HTML = `<!doctype html>
<html><head><meta charset="utf-8"><title>Service API</title>
<link rel="stylesheet" href="/v1/swagger-ui/swagger-ui.css"></head>
<body><div id="ui"></div>
<script src="/v1/swagger-ui/swagger-ui-bundle.js"></script>
<script>window.ui = SwaggerUIBundle({ url: '/v1/openapi.json', dom_id: '#ui' });</script>
</body></html>`;

const STATIC_TYPES: Record<string, string> = {
  '.css': 'text/css',
  '.js': 'application/javascript',
  '.png': 'image/png',
  '.map': 'application/json',
};

/** /v1/openapi.json and the Swagger UI (served from the swagger-ui-dist package, no CDN). */
export function openApiRoutes(router: Router<AppState, { services: ApiServices }>): void {
  router.get('/v1/openapi.json', (ctx) => {
    ctx.body = openApiDocument((ctx as unknown as { services: ApiServices }).services.version);
  });
  router.get('/v1/swagger-ui/', (ctx) => {
    ctx.type = 'text/html';
    ctx.body = SWAGGER_HTML;
  });
  const dist = path.dirname(require.resolve('swagger-ui-dist/package.json'));
  router.get('/v1/swagger-ui/:file', async (ctx) => {
    const file = ctx.params.file;
    const ext = path.extname(file);
    if (!/^[\w.-]+$/.test(file) || !STATIC_TYPES[ext]) throw notFound('file');
    try {
      ctx.body = await readFile(path.join(dist, file));
      ctx.type = STATIC_TYPES[ext];
      ctx.set('Cache-Control', 'public, max-age=86400');
    } catch {
      throw notFound('file');
    }
  });
}
