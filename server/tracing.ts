import type { Span, Tracer } from '@opentelemetry/api';

/** What the HTTP layer needs of tracing: a span per request, child of the caller's `traceparent`. */
export type RequestTracer = {
  /** Starts the span of one request; `end` closes it with the route template and status. */
  startRequest(method: string, traceparent: string | undefined, tracestate: string | undefined): { end(route: string, status: number): void };
  /** Sends what is buffered and stops exporting. */
  shutdown(): Promise<void>;
};

/**
 * OpenTelemetry traces, exported with OTLP/HTTP to `endpoint` (OTEL_EXPORTER_OTLP_ENDPOINT). The
 * SDK is loaded only here, when an endpoint is set: without one nothing of it is imported and a
 * request pays one null check. A caller's `traceparent` (W3C Trace Context) becomes the parent of
 * the request's span.
 */
export async function startTracing(endpoint: string, serviceName: string): Promise<RequestTracer> {
  const [{ ROOT_CONTEXT, SpanKind, SpanStatusCode }, { W3CTraceContextPropagator }, sdk, { OTLPTraceExporter }, { resourceFromAttributes }] = await Promise.all(
    [
      import('@opentelemetry/api'),
      import('@opentelemetry/core'),
      import('@opentelemetry/sdk-trace-base'),
      import('@opentelemetry/exporter-trace-otlp-http'),
      import('@opentelemetry/resources'),
    ],
  );
  const exporter = new OTLPTraceExporter({ url: `${endpoint.replace(/\/$/, '')}/v1/traces` });
  const provider = new sdk.BasicTracerProvider({
    resource: resourceFromAttributes({ 'service.name': serviceName }),
    spanProcessors: [new sdk.BatchSpanProcessor(exporter, { scheduledDelayMillis: 1000 })],
  });
  const tracer: Tracer = provider.getTracer('agent-control-plane');
  const propagator = new W3CTraceContextPropagator();
  const getter = {
    keys: (carrier: Record<string, string>) => Object.keys(carrier),
    get: (carrier: Record<string, string>, key: string) => carrier[key],
  };
  return {
    startRequest(method, traceparent, tracestate) {
      const carrier: Record<string, string> = {};
      if (traceparent) carrier.traceparent = traceparent;
      if (tracestate) carrier.tracestate = tracestate;
      const parent = traceparent ? propagator.extract(ROOT_CONTEXT, carrier, getter) : ROOT_CONTEXT;
      const span: Span = tracer.startSpan(method, { kind: SpanKind.SERVER, attributes: { 'http.request.method': method } }, parent);
      return {
        end(route, status) {
          // Named and labelled by the route's template (OpenTelemetry's HTTP conventions), never its path.
          span.updateName(`${method} ${route}`);
          span.setAttribute('http.route', route);
          span.setAttribute('http.response.status_code', status);
          if (status >= 500) span.setStatus({ code: SpanStatusCode.ERROR });
          span.end();
        },
      };
    },
    async shutdown() {
      await provider.shutdown();
    },
  };
}
