import Ajv2020 from 'ajv/dist/2020';
import addFormats from 'ajv-formats';
import type { ValidateFunction } from 'ajv';
import { createHash, randomBytes } from 'node:crypto';
import { mkdirSync, readdirSync, readFileSync, renameSync, statSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { openApiDocument, withResponsesInline } from '../../api/openapiSpec';
import { openApiRegistry } from '../../shared/zod';

/**
 * Checks responses against the OpenAPI document: finds the operation of a method and concrete
 * path, and validates a JSON body against the schema documented for its status. The document's
 * component schemas are compiled once (their `#/components/schemas/X` refs rewritten to one
 * shared schema), each response schema on first use.
 */
type Doc = { paths: Record<string, Record<string, Operation>>; components?: { schemas?: Record<string, unknown> } };
type Operation = {
  parameters?: Array<{ name: string; in: string; schema?: unknown }>;
  responses?: Record<string, { content?: Record<string, { schema?: unknown }> }>;
};

const COMPONENTS_ID = 'openapi-components';

export interface ResponseChecker {
  /** The documented path template matching `path` for `method`, or undefined. */
  operationOf(method: string, path: string): { template: string; op: Operation } | undefined;
  /** A message saying how the body departs from its documented schema, or null when it matches. */
  check(method: string, path: string, status: number, body: unknown): string | null;
  /**
   * Whether a documented GET answers this path (a query is ignored): its template matches and each
   * templated segment is a value the path parameter's schema admits (`/v1/gps/batch` fits
   * `/v1/gps/{id}` as text, but not the UUID that route takes).
   */
  readable(path: string): boolean;
}

/** The compiled tree (dist/) whose routes the document describes. */
const DIST = path.resolve(__dirname, '../..');
/** Where documents built by earlier test files of this build are kept (gitignored; prepare.ts empties it). */
export const OPENAPI_CACHE_DIR = path.resolve(DIST, '../.run/openapi-cache');

/** A fingerprint of the build: every compiled file's path, size and modification time. */
function buildFingerprint(): string {
  const hash = createHash('sha256');
  const walk = (dir: string) => {
    for (const entry of readdirSync(dir, { withFileTypes: true }).sort((a, b) => a.name.localeCompare(b.name))) {
      const full = path.join(dir, entry.name);
      if (entry.isDirectory()) walk(full);
      else if (entry.name.endsWith('.js')) {
        const st = statSync(full);
        hash.update(`${full}\0${st.size}\0${st.mtimeMs}\n`);
      }
    }
  };
  walk(DIST);
  return hash.digest('hex').slice(0, 32);
}

/** The operations registered in this process: a test file may add routes of its own (test/api/routing.test.ts). */
function registeredOperations(): string {
  const lines = openApiRegistry.definitions.map((d) => {
    const op = d.type === 'route' ? d.route : d.type === 'webhook' ? d.webhook : undefined;
    return op ? `${d.type} ${op.method} ${op.path}` : d.type;
  });
  return lines.join('\n');
}

/**
 * The OpenAPI document of this build, as openApiDocument(version) gives it once the api has
 * registered its routes. Generating it takes most of a second of CPU, and every test file's stack
 * needs it for its response checker; so the first file of a build writes it to OPENAPI_CACHE_DIR
 * (keyed by a fingerprint of the compiled files, the registered operations and the version) and
 * the others read it. A rebuilt tree, or a file that registers routes of its own, has another
 * fingerprint, so it never reads a document that is not its own.
 */
export function cachedOpenApiDocument(version: string): Record<string, unknown> {
  const key = createHash('sha256').update(`${buildFingerprint()}\n${registeredOperations()}\n${version}`).digest('hex');
  const file = path.join(OPENAPI_CACHE_DIR, `${key.slice(0, 32)}.json`);
  try {
    return JSON.parse(readFileSync(file, 'utf8')) as Record<string, unknown>;
  } catch {
    const doc = openApiDocument(version);
    mkdirSync(OPENAPI_CACHE_DIR, { recursive: true });
    // Written aside and renamed: a file starting at the same moment reads a whole document or none.
    const tmp = `${file}.${randomBytes(4).toString('hex')}.tmp`;
    writeFileSync(tmp, JSON.stringify(doc));
    renameSync(tmp, file);
    return doc;
  }
}

export function responseChecker(document: Doc): ResponseChecker {
  // Operations refer to the standard answers (components/responses): checked as what they name.
  const doc = withResponsesInline(document as Record<string, unknown>) as Doc;
  // validateSchema off: checking each schema against the 2020-12 meta-schema (compiled first, most
  // of the checker's start) is test/docs/openapi.test.ts's job, which validates the whole document.
  const ajv = new Ajv2020({ strict: false, allErrors: false, validateFormats: true, validateSchema: false });
  addFormats(ajv);
  const rewrite = (schema: unknown) =>
    JSON.parse(JSON.stringify(schema).replaceAll('"#/components/schemas/', `"${COMPONENTS_ID}#/$defs/`));
  ajv.addSchema({ $id: COMPONENTS_ID, $defs: rewrite(doc.components?.schemas ?? {}) });
  // Compiled now (at stack start), not inside the first request a test times.
  ajv.getSchema(COMPONENTS_ID);
  const templates = Object.keys(doc.paths).map((template) => ({
    template,
    re: new RegExp(`^${template.replace(/[.*+?^$()|[\]\\]/g, '\\$&').replace(/\\?\{[^}]+\\?\}/g, '[^/]+')}$`),
    literal: !template.includes('{'),
  }));
  // Literal paths win over templated ones (/v1/users/me before /v1/users/{id}).
  templates.sort((a, b) => Number(b.literal) - Number(a.literal));
  const compiled = new Map<string, ValidateFunction | null>();

  function operationOf(method: string, path: string) {
    const bare = path.split('?')[0];
    for (const t of templates) {
      const op = doc.paths[t.template][method.toLowerCase()];
      if (op && t.re.test(bare)) return { template: t.template, op };
    }
    return undefined;
  }

  const paramChecks = new Map<string, ValidateFunction>();
  function readable(path: string): boolean {
    const segments = path.split('?')[0].split('/');
    return templates.some(({ template, re }) => {
      const op = doc.paths[template].get;
      if (!op || !re.test(path.split('?')[0])) return false;
      return template.split('/').every((seg, i) => {
        const name = /^\{(.+)\}$/.exec(seg)?.[1];
        const schema = name && op.parameters?.find((p) => p.in === 'path' && p.name === name)?.schema;
        if (!schema) return true;
        const key = `${template} ${name}`;
        let validate = paramChecks.get(key);
        if (!validate) paramChecks.set(key, (validate = ajv.compile(rewrite(schema))));
        return validate(decodeURIComponent(segments[i]));
      });
    });
  }

  return {
    operationOf,
    readable,
    check(method, path, status, body) {
      const found = operationOf(method, path);
      if (!found) return `${method} ${path} is not in the OpenAPI document`;
      const key = `${method} ${found.template} ${status}`;
      if (!compiled.has(key)) {
        const response = found.op.responses?.[String(status)];
        if (!response) {
          compiled.set(key, null);
          return `${method} ${found.template} does not document status ${status}`;
        }
        const schema = response.content?.['application/json']?.schema;
        compiled.set(key, schema ? ajv.compile(rewrite(schema)) : null);
      }
      const validate = compiled.get(key);
      if (!validate) {
        const response = found.op.responses?.[String(status)];
        if (!response) return `${method} ${found.template} does not document status ${status}`;
        if (!response.content?.['application/json'])
          return `${method} ${found.template} ${status}: no JSON response schema documented`;
        return null;
      }
      if (validate(body)) return null;
      const e = validate.errors?.[0];
      return `${method} ${found.template} ${status}: body${e?.instancePath ?? ''} ${e?.message ?? 'does not match'} (${JSON.stringify(e?.params)})`;
    },
  };
}
