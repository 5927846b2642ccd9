import path from 'node:path';
import type Router from '@koa/router';
import { notFound } from '../../shared/errors';
import type { AppState } from '../routing';
import type { ApiServices } from '../services';
import { sendStaticFile, staticFile } from '../staticFiles';

/**
 * GraphiQL served from the installed npm packages (graphiql, react, react-dom UMD builds), like the
 * Swagger UI: the page works on a machine without internet access, and nothing leaves it.
 */
const ASSETS: Record<string, { pkg: string; file: string; type: string }> = {
  'graphiql.min.css': { pkg: 'graphiql', file: 'graphiql.min.css', type: 'text/css' },
  'graphiql.min.js': { pkg: 'graphiql', file: 'graphiql.min.js', type: 'application/javascript' },
  'react.production.min.js': { pkg: 'react', file: 'umd/react.production.min.js', type: 'application/javascript' },
  'react-dom.production.min.js': {
    pkg: 'react-dom',
    file: 'umd/react-dom.production.min.js',
    type: 'application/javascript',
  },
};

const BASE = '/v1/graphiql';

const INIT_JS = `ReactDOM.createRoot(document.getElementById('graphiql')).render(
  React.createElement(GraphiQL, { fetcher: GraphiQL.createFetcher({ url: '/v1/gql' }), defaultEditorToolsVisibility: true }),
);`;

const HTML = `<!doctype html>
<html><head><meta charset="utf-8"><title>GraphiQL</title><link rel="icon" href="data:,">
<link rel="stylesheet" href="${BASE}/graphiql.min.css"></head>
<body style="margin:0"><div id="graphiql" style="height:100vh"></div>
<script src="${BASE}/react.production.min.js"></script>
<script src="${BASE}/react-dom.production.min.js"></script>
<script src="${BASE}/graphiql.min.js"></script>
<script src="${BASE}/init.js"></script>
</body></html>`;

/** Scripts, styles and requests only from this origin (fonts and icons of the stylesheet are data: URLs). */
const CSP =
  "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; font-src 'self' data:; connect-src 'self'; frame-ancestors 'none'";

/** GET /v1/graphiql and its assets (outside production only; the caller decides). */
export function graphiqlRoutes(router: Router<AppState, { services: ApiServices }>): void {
  router.get(BASE, (ctx) => {
    ctx.type = 'text/html';
    ctx.set('Content-Security-Policy', CSP);
    ctx.body = HTML;
  });
  router.get(`${BASE}/init.js`, (ctx) => {
    ctx.type = 'application/javascript';
    ctx.body = INIT_JS;
  });
  router.get(`${BASE}/:file`, async (ctx) => {
    const asset = ASSETS[ctx.params.file];
    if (!asset) throw notFound('file');
    const dir = path.dirname(require.resolve(`${asset.pkg}/package.json`));
    const found = await staticFile(path.join(dir, asset.file));
    if (!found) throw notFound('file');
    sendStaticFile(ctx, found, asset.type);
  });
}
