import type { Middleware } from 'koa';
import { HttpMethodEnum, koaBody } from 'koa-body';

/**
 * JSON and form bodies (koa-body) for the methods that carry one; a malformed body is a 400
 * (entity.parse.failed, answered by the error handler). GET, HEAD and OPTIONS skip the parser
 * entirely: they are most requests and carry no body.
 */
export function bodyParser(): Middleware {
  const parse = koaBody({
    jsonLimit: '4mb',
    formLimit: '256kb',
    text: false,
    multipart: false,
    jsonStrict: true,
    parsedMethods: [HttpMethodEnum.POST, HttpMethodEnum.PUT, HttpMethodEnum.PATCH, HttpMethodEnum.DELETE],
    onError: (err) => {
      throw Object.assign(new Error(err.message), { status: 400, type: 'entity.parse.failed' });
    },
  });
  return (ctx, next) => (ctx.method === 'GET' || ctx.method === 'HEAD' || ctx.method === 'OPTIONS' ? next() : parse(ctx, next));
}
