import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

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
