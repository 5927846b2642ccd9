import type { Middleware } from 'koa';
import { HttpMethodEnum, koaBody } from 'koa-body';
import { HttpError } from '../../shared/errors';

/**
 * JSON and form bodies (koa-body) for the methods that carry one; a malformed body is a 400
 * (entity.parse.failed, answered by the error handler), one over the limit a 413, an unsupported
 * charset a 415. GET, HEAD and OPTIONS skip the parser entirely: they are most requests and carry
 * no body.
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
      const status = (err as { status?: number }).status;
      if (status === 413)
        throw new HttpError(413, 'PayloadTooLarge', 'request body too large (JSON up to 4 MB, forms up to 256 KB)');
      if (status === 415) throw new HttpError(415, 'UnsupportedMediaType', err.message);
      throw Object.assign(new Error(err.message), { status: 400, type: 'entity.parse.failed' });
    },
  });
  return (ctx, next) =>
    ctx.method === 'GET' || ctx.method === 'HEAD' || ctx.method === 'OPTIONS' ? next() : parse(ctx, next);
}
