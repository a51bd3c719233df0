import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { apiClient, eventually } from '../helpers/api.ts';
import { dockerBody, uniqueName } from '../helpers/fixtures.ts';
import { type ServerProcess, startServerProcess } from '../helpers/server-process.ts';

type OtlpSpan = { traceId: string; spanId: string; parentSpanId?: string; name: string; attributes: Array<{ key: string; value: Record<string, unknown> }> };

/**
 * A stand-in OpenTelemetry collector on a loopback port: it takes OTLP/HTTP JSON exports at
 * `/v1/traces` (as a real collector's OTLP receiver does) and keeps the spans.
 */
function standInCollector(): Promise<{ server: Server; url: string; spans: OtlpSpan[] }> {
  const spans: OtlpSpan[] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      if (req.url === '/v1/traces' && req.method === 'POST' && String(req.headers['content-type']).includes('json')) {
        const body = JSON.parse(Buffer.concat(chunks).toString('utf8'));
        for (const resource of body.resourceSpans ?? []) for (const scope of resource.scopeSpans ?? []) spans.push(...(scope.spans ?? []));
        res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
      } else res.writeHead(415).end();
    });
  });
  return new Promise((resolve) =>
    server.listen(0, '127.0.0.1', () => resolve({ server, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, spans })),
  );
}

describe('traces: OTLP/HTTP export when OTEL_EXPORTER_OTLP_ENDPOINT is set (contract §17, server side)', () => {
  let collector: Awaited<ReturnType<typeof standInCollector>>;
  let server: ServerProcess;
  beforeAll(async () => {
    collector = await standInCollector();
    server = await startServerProcess({ OTEL_EXPORTER_OTLP_ENDPOINT: collector.url, OTEL_SERVICE_NAME: 'acp-test' });
  });
  afterAll(async () => {
    await server?.kill();
    collector?.server.close();
  });

  it("a request's span is exported, child of the caller's traceparent, named by the route template", async () => {
    const traceId = crypto.randomUUID().replace(/-/g, '');
    const parentSpanId = crypto.randomUUID().replace(/-/g, '').slice(0, 16);
    const api = apiClient(server.url, server.apiKey);
    const listeners = await api.get('/v2/listeners');
    const created = await api.post('/v2/deployments', dockerBody(uniqueName(), listeners.body.resources[0].id), {
      traceparent: `00-${traceId}-${parentSpanId}-01`,
    });
    expect(created.status).toBe(201);
    const span = await eventually(async () => collector.spans.find((s) => s.traceId === traceId), 20_000);
    expect(span.parentSpanId).toBe(parentSpanId);
    expect(span.name).toBe('POST /v2/deployments');
    const attribute = (key: string) => span.attributes.find((a) => a.key === key)?.value;
    expect(attribute('http.route')).toEqual({ stringValue: '/v2/deployments' });
    expect(Object.values(attribute('http.response.status_code') ?? {})[0]).toBe(201);
    // A request without a traceparent starts a trace of its own.
    await api.get('/v2/deployments');
    const own = await eventually(async () => collector.spans.find((s) => s.name === 'GET /v2/deployments'), 20_000);
    expect(own.traceId).not.toBe(traceId);
    expect(own.parentSpanId ?? '').toBe('');
  });
});
