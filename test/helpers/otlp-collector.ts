import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { expect } from 'vitest';
import { eventually } from './api.ts';

type OtlpValue = Record<string, unknown>;
/** A span as an OTLP/HTTP JSON export carries it, with the `service.name` of the resource that sent it. */
export type CollectedSpan = {
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  name: string;
  kind?: number;
  attributes: Array<{ key: string; value: OtlpValue }>;
  service: string;
};

/** A span's attribute as a plain value (`stringValue`, `intValue`…), undefined when absent. */
export function attributeOf(span: CollectedSpan, key: string): unknown {
  const value = span.attributes.find((a) => a.key === key)?.value;
  return value ? Object.values(value)[0] : undefined;
}

/**
 * A stand-in OpenTelemetry collector on a loopback port: it takes OTLP/HTTP JSON exports at
 * `/v1/traces` (as a real collector's OTLP receiver does) and keeps the spans, each with the
 * `service.name` of its resource.
 */
export function standInCollector(): Promise<{ server: Server; url: string; spans: CollectedSpan[] }> {
  const spans: CollectedSpan[] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      if (req.url === '/v1/traces' && req.method === 'POST' && String(req.headers['content-type']).includes('json')) {
        const body = JSON.parse(Buffer.concat(chunks).toString('utf8'));
        for (const resource of body.resourceSpans ?? []) {
          const service = resource.resource?.attributes?.find((a: { key: string }) => a.key === 'service.name')?.value?.stringValue ?? '';
          for (const scope of resource.scopeSpans ?? []) for (const span of scope.spans ?? []) spans.push({ ...span, service });
        }
        res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
      } else res.writeHead(415).end();
    });
  });
  return new Promise((resolve) =>
    server.listen(0, '127.0.0.1', () => resolve({ server, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, spans })),
  );
}

/** A new W3C `traceparent` (sampled) and its trace and span ids. */
export function newTraceparent(): { traceparent: string; traceId: string; spanId: string } {
  const traceId = crypto.randomUUID().replace(/-/g, '');
  const spanId = crypto.randomUUID().replace(/-/g, '').slice(0, 16);
  return { traceparent: `00-${traceId}-${spanId}-01`, traceId, spanId };
}

/**
 * The spans of `traceId` once every name in `names` has arrived (exporters send in batches), and
 * checks that `service`'s spans are exactly `steps`, each a child of the trace's create request
 * span and naming `revisionId`. Answers the whole trace.
 */
export async function agentStepsOfTrace(
  spans: CollectedSpan[],
  check: { traceId: string; service: string; steps: string[]; revisionId: string; timeoutMs?: number },
): Promise<CollectedSpan[]> {
  const wanted = [...check.steps, 'revision DEPLOYED'];
  const trace = await eventually(async () => {
    const found = spans.filter((s) => s.traceId === check.traceId);
    return wanted.every((name) => found.some((s) => s.name === name)) ? found : undefined;
  }, check.timeoutMs ?? 30_000);
  const request = trace.find((s) => s.name === 'POST /v2/deployments');
  expect(request, 'the create request span').toBeDefined();
  const steps = trace.filter((s) => s.service === check.service);
  expect(steps.map((s) => s.name).sort()).toEqual([...check.steps].sort());
  for (const span of steps) {
    expect(span.parentSpanId).toBe(request!.spanId);
    expect(attributeOf(span, 'acp.revision.id')).toBe(check.revisionId);
  }
  return trace;
}
