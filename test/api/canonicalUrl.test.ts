import test from 'ava';
import { createUser } from '../helpers/factories';
import { rawRequest } from '../helpers/rawHttp';
import { useStack } from '../helpers/stack';

const stack = useStack(test);

/** GET `path` with a token, as fetch sends it: these spellings are not the OpenAPI document's. */
async function get(url: string, path: string, token: string) {
  const r = await fetch(`${url}${path}`, { headers: { authorization: `Bearer ${token}` } });
  return { status: r.status, etag: r.headers.get('etag'), body: (await r.json()) as any };
}

test('links name the documented spelling: case, a trailing slash and undeclared parameters are not echoed', async (t) => {
  const s = stack();
  const admin = await createUser(s.db, { roles: ['role_admin'] });
  for (const path of ['/V1/ROLES/', '/v1/roles?_=1690000000', '/v1/Roles?cache=<x>']) {
    const r = await get(s.url, path, admin.token);
    t.is(r.status, 200, path);
    t.is(r.body._links.self, '/v1/roles', path);
  }
  const page = await get(s.url, '/V1/Users/?limit=2&_=9&include_deleted=false&page=1', admin.token);
  t.is(page.status, 200);
  t.is(page.body._links.self, '/v1/users?page=1&limit=2&include_deleted=false');
  t.is(page.body._links.first, '/v1/users?page=1&limit=2&include_deleted=false');
  const one = await get(s.url, `/v1/users/${admin.id.toUpperCase()}`, admin.token);
  t.is(one.status, 200);
  t.is(one.body._links.self, `/v1/users/${admin.id}`);
  const me = await get(s.url, '/V1/USERS/ME/SESSIONS/', admin.token);
  t.is(me.status, 200);
  t.is(me.body._links.self, '/v1/users/me/sessions');
});

test('the response cache keeps one answer per documented URL, whatever spelling asked for it', async (t) => {
  const s = stack();
  const admin = await createUser(s.db, { roles: ['role_admin'] });
  const first = await get(s.url, '/v1/roles', admin.token);
  t.truthy(first.etag);
  // One cached answer, so one ETag: a spelling or cache-buster was a miss (a rebuild) each time.
  for (const path of ['/V1/ROLES/', '/v1/roles?_=1', '/v1/roles?_=2']) {
    const r = await get(s.url, path, admin.token);
    t.is(r.etag, first.etag, path);
  }
  // Raw: fetch adds Cache-Control: no-cache to a request with If-None-Match, which never validates.
  const busted = await rawRequest(
    s.api.port,
    `GET /v1/roles?_=3 HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${admin.token}\r\n` +
      `Accept-Encoding: gzip\r\nIf-None-Match: ${first.etag}\r\nConnection: close\r\n\r\n`,
  );
  t.is(busted.status, 304, busted.raw);
});
