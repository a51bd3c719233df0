import { type Context, Hono } from 'hono';
import { z } from 'zod';
import { ErrorDetail } from '../../shared/schemas/common.ts';
import type { Readiness } from '../domain/readiness.ts';
import type { RouteContext } from '../http/env.ts';
import { route } from '../http/route.ts';
import type { Metrics } from '../metrics.ts';
import { STORAGE_RETRY_AFTER_SECONDS } from '../store/storage-errors.ts';

const healthz = (c: Context) => c.json({ status: 'ok' });

async function readyz(c: Context, readiness: Readiness) {
  const state = await readiness.check();
  if (state.ok) return c.json({ status: 'ok' });
  c.header('retry-after', String(STORAGE_RETRY_AFTER_SECONDS));
  return c.json({ detail: state.problem }, 503);
}

export function healthRoutes(ctx: RouteContext): void {
  const Status = z.object({ status: z.string() });
  route(
    ctx,
    { method: 'get', path: '/healthz', summary: 'The server accepts requests', tag: 'health', auth: 'none', response: { status: 200, schema: Status } },
    healthz,
  );
  route(
    ctx,
    {
      method: 'get',
      path: '/readyz',
      summary: 'The database takes writes',
      tag: 'health',
      auth: 'none',
      response: { status: 200, schema: Status },
      responses: [
        {
          status: 503,
          schema: ErrorDetail,
          description: 'The database does not take writes (the detail names the problem)',
          headers: { 'Retry-After': 'Seconds to wait before asking again' },
        },
      ],
    },
    (c) => readyz(c, ctx.services.readiness),
  );
  let document: Record<string, unknown> | undefined;
  route(
    ctx,
    {
      method: 'get',
      path: '/openapi.json',
      summary: 'This OpenAPI document',
      tag: 'health',
      auth: 'none',
      response: { status: 200, schema: z.looseObject({ openapi: z.string() }), description: 'An OpenAPI 3.1 document' },
    },
    (c) => {
      document ??= ctx.docs.document();
      return c.json(document);
    },
  );
}

/**
 * The app of the health port (`HEALTH_PORT`): `/healthz` and `/readyz`, the same answers as on the
 * main port, so probes keep an answer while the main port's connections are all taken, and
 * `/metrics` (Prometheus text), kept off the main port so that it is reachable only where the
 * health port is (a scrape reveals the cluster's size and traffic, not for every API client).
 */
export function healthApp(readiness: Readiness, metrics: Pick<Metrics, 'text'>): Hono {
  const app = new Hono();
  app.get('/healthz', healthz);
  app.get('/readyz', (c) => readyz(c, readiness));
  app.get('/metrics', async (c) => {
    const { body, contentType } = await metrics.text();
    return c.body(body, 200, { 'content-type': contentType });
  });
  app.notFound((c) => c.json({ detail: 'The health port serves only GET /healthz, GET /readyz and GET /metrics.' }, 404));
  return app;
}
