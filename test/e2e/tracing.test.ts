import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { apiClient, eventually } from '../helpers/api.ts';
import { dockerBody, uniqueName } from '../helpers/fixtures.ts';
import { attributeOf, newTraceparent, standInCollector } from '../helpers/otlp-collector.ts';
import { type ServerProcess, startServerProcess } from '../helpers/server-process.ts';

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
    const { traceparent, traceId, spanId: parentSpanId } = newTraceparent();
    const api = apiClient(server.url, server.apiKey);
    const listeners = await api.get('/v2/listeners');
    const created = await api.post('/v2/deployments', dockerBody(uniqueName(), listeners.body.resources[0].id), {
      traceparent,
    });
    expect(created.status).toBe(201);
    const span = await eventually(async () => collector.spans.find((s) => s.traceId === traceId), 20_000);
    expect(span.parentSpanId).toBe(parentSpanId);
    expect(span.name).toBe('POST /v2/deployments');
    expect(attributeOf(span, 'http.route')).toBe('/v2/deployments');
    expect(attributeOf(span, 'http.response.status_code')).toBe(201);
    // A request without a traceparent starts a trace of its own.
    await api.get('/v2/deployments');
    const own = await eventually(async () => collector.spans.find((s) => s.name === 'GET /v2/deployments'), 20_000);
    expect(own.traceId).not.toBe(traceId);
    expect(own.parentSpanId ?? '').toBe('');
  });
});
