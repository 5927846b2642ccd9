import Router from '@koa/router';
import { createHash } from 'node:crypto';
import path from 'node:path';
import { notFound } from '../../shared/errors';
import { z } from '../../shared/zod';
import { asyncApiDocument } from '../asyncapiDocument';
import { reusable } from '../compression';
import { documentRoute, openApiDocument } from '../openapiSpec';
import { sendHtml, sendValidatedBytes } from '../responses';
import { sendStaticFile, staticFile } from '../staticFiles';
import type { AppState } from '../routing';
import type { ApiServices } from '../services';

const serialised = new Map<string, { json: Buffer; etag: string }>();

/**
 * A document, serialised once with its ETag (the route table does not change while the process
 * runs), kept as UTF-8 bytes: a string body would be measured and encoded again on every request.
 */
function documentJson(name: string, build: () => unknown): { json: Buffer; etag: string } {
  let doc = serialised.get(name);
  if (!doc) {
    const json = reusable(Buffer.from(JSON.stringify(build())));
    doc = { json, etag: `"${createHash('sha1').update(json).digest('base64url')}"` };
    serialised.set(name, doc);
  }
  return doc;
}

const SWAGGER_INIT =
  "window.ui = SwaggerUIBundle({ url: '/v1/openapi.json', dom_id: '#ui', validatorUrl: null, deepLinking: true });";
const SWAGGER_HTML = `<!doctype html>
<html><head><meta charset="utf-8"><title>Service API</title>
<link rel="stylesheet" href="/v1/swagger-ui/swagger-ui.css"></head>
<body><div id="ui"></div>
<script src="/v1/swagger-ui/swagger-ui-bundle.js"></script>
<script>${SWAGGER_INIT}</script>
</body></html>`;
/**
 * Swagger UI loads only its own bundle (and the one inline start-up script, by its hash), calls only
 * this origin, and is never framed: a page that sends requests with a token pasted into it is not to
 * be overlaid by another site.
 */
const SWAGGER_CSP = [
  "default-src 'self'",
  `script-src 'self' 'sha256-${createHash('sha256').update(SWAGGER_INIT).digest('base64')}'`,
  "style-src 'self' 'unsafe-inline'",
  "img-src 'self' data:",
  "font-src 'self' data:",
  "connect-src 'self'",
  "form-action 'self'",
  "base-uri 'none'",
  "frame-ancestors 'none'",
].join('; ');

const STATIC_TYPES: Record<string, string> = {
  '.css': 'text/css',
  '.js': 'application/javascript',
  '.png': 'image/png',
  '.map': 'application/json',
};

/** /v1/openapi.json and the Swagger UI (served from the swagger-ui-dist package, no CDN). */
export function openApiRoutes(router: Router<AppState, { services: ApiServices }>): void {
  documentRoute({
    method: 'get',
    path: '/v1/openapi.json',
    summary: 'This OpenAPI 3.1 document',
    tags: ['docs'],
    auth: 'public',
    responses: { 200: { description: 'The document', schema: z.object({ openapi: z.string() }).passthrough() } },
    conditional: true,
  });
  documentRoute({
    method: 'get',
    path: '/v1/swagger-ui/',
    summary: 'Swagger UI for this document',
    tags: ['docs'],
    auth: 'public',
    responses: { 200: { description: 'HTML page', schema: z.string(), contentType: 'text/html' } },
  });
  documentRoute({
    method: 'get',
    path: '/v1/swagger-ui/:file',
    summary: "A file of Swagger UI's bundle",
    tags: ['docs'],
    auth: 'public',
    params: z.object({ file: z.string() }),
    responses: {
      200: {
        description: 'CSS, JavaScript, image or source map, by the file name extension',
        schema: z.string(),
        contentType: [...new Set(Object.values(STATIC_TYPES))],
        schemaByType: {
          'image/png': z.string().openapi({ format: 'binary' }),
          'application/json': z.object({}).passthrough().openapi({ description: 'A source map' }),
        },
      },
      404: { description: 'No such file' },
    },
    conditional: true,
  });
  documentRoute({
    method: 'get',
    path: '/v1/asyncapi.json',
    summary: 'The AsyncAPI 3.0 document of the WebSocket API (/v1/ws)',
    tags: ['docs'],
    auth: 'public',
    responses: { 200: { description: 'The document', schema: z.object({ asyncapi: z.string() }).passthrough() } },
    conditional: true,
  });
  const documents = {
    '/v1/openapi.json': (version: string) => openApiDocument(version),
    '/v1/asyncapi.json': (version: string) => asyncApiDocument(version),
  };
  for (const [route, build] of Object.entries(documents))
    router.get(route, (ctx) => {
      const version = (ctx as unknown as { services: ApiServices }).services.version;
      const doc = documentJson(route, () => build(version));
      sendValidatedBytes(ctx, { etag: doc.etag, type: 'application/json', body: doc.json });
    });
  router.get('/v1/swagger-ui/', (ctx) => sendHtml(ctx, SWAGGER_HTML, SWAGGER_CSP));
  const dist = path.dirname(require.resolve('swagger-ui-dist/package.json'));
  router.get('/v1/swagger-ui/:file', async (ctx) => {
    const file = ctx.params.file;
    const ext = path.extname(file);
    if (!/^[\w.-]+$/.test(file) || !STATIC_TYPES[ext]) throw notFound('file');
    const found = await staticFile(path.join(dist, file));
    if (!found) throw notFound('file');
    sendStaticFile(ctx, found, STATIC_TYPES[ext]);
  });
}
