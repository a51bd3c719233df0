import { z } from 'zod';
import { UPLOAD_PATH_PREFIX } from '../domain/uploads.ts';
import type { RouteContext } from '../http/env.ts';
import { route } from '../http/route.ts';
import { pathId, SignedUrlQuery } from '../http/validation.ts';

/** The signed `PUT` of a source tarball: authorized by the URL's signature, not an API key. */
export function uploadRoutes(ctx: RouteContext): void {
  const { uploads } = ctx.services;
  route(
    ctx,
    {
      method: 'put',
      path: `${UPLOAD_PATH_PREFIX}:upload_id`,
      summary: 'Upload a gzip source tarball to a signed URL from POST /v2/deployments/{id}/upload-url (no API key; the signature authorizes it)',
      tag: 'deployments',
      query: SignedUrlQuery,
      auth: 'signed-url',
      bodyContentType: 'application/gzip',
      response: { status: 200, schema: z.object({ object_path: z.string(), size: z.int() }) },
      // The signature authorizes it (403 when wrong or expired, 409 when the URL was used); no API key, so the errors are listed.
      errors: [400, 403, 404, 409, 413, 422, 503],
      ownInput: 'the body is a gzip stream written as it arrives, and the query is the signature that authorizes it (403 when wrong, not 422)',
    },
    async (c) => {
      const declared = c.req.header('content-length');
      const result = await uploads.receive({
        id: pathId(c, 'upload_id'),
        expires: c.req.query('expires'),
        signature: c.req.query('signature'),
        declaredLength: declared !== undefined && /^\d+$/.test(declared) ? Number(declared) : null,
        body: () => c.req.raw.body,
      });
      return c.json(result);
    },
  );
}
