import type { Attributes, Span, SpanKind, Tracer } from '@opentelemetry/api';
import { commonJsExports } from './commonjs-exports.ts';

/** W3C Trace Context's `traceparent`: version 00, a trace id, a parent span id, flags. */
const TRACEPARENT = /^00-(?!0{32})[0-9a-f]{32}-(?!0{16})[0-9a-f]{16}-[0-9a-f]{2}$/;

/** `value` when it is a well-formed W3C `traceparent`, else undefined (a caller's header is not trusted as given). */
export function validTraceparent(value: string | null | undefined): string | undefined {
  return value && TRACEPARENT.test(value) ? value : undefined;
}

export type SpanOptions = {
  kind?: 'internal' | 'server' | 'client' | 'consumer';
  attributes?: Attributes;
  /** The parent's `traceparent`; none: the span starts a trace of its own. */
  parent?: string | null;
  startTime?: number;
};

/** A span as the code around it sees it: its own `traceparent` (to hand on as a parent), more attributes, its end. */
export type OpenSpan = {
  readonly traceparent: string;
  set(attributes: Attributes): void;
  /** Ends the span; `error` marks it failed (OpenTelemetry's status ERROR, `error.type`). */
  end(error?: unknown): void;
  readonly raw: Span;
};

/** OpenTelemetry traces of one process, exported with OTLP/HTTP; what server and agents share. */
export type OtlpTracing = {
  start(name: string, options?: SpanOptions): OpenSpan;
  /** Runs `work` inside a span, ended when it settles (failed when it throws). */
  inSpan<T>(name: string, options: SpanOptions, work: (span: OpenSpan) => Promise<T>): Promise<T>;
  /** Sends what is buffered and stops exporting. */
  shutdown(): Promise<void>;
};

/**
 * Starts exporting spans with OTLP/HTTP (JSON) to `<endpoint>/v1/traces`, batched every second.
 * The SDK is imported here only, so a process without an endpoint never loads it. Parents are
 * given as `traceparent` strings, not through a context manager: the spans of a revision are
 * parented to the trace context stored with it, across processes and machines.
 */
export async function startOtlpTracing(endpoint: string, serviceName: string, scope: string): Promise<OtlpTracing> {
  const [api, { W3CTraceContextPropagator }, sdk, { OTLPTraceExporter }, { resourceFromAttributes }] = await Promise.all([
    import('@opentelemetry/api'),
    import('@opentelemetry/core').then(commonJsExports),
    import('@opentelemetry/sdk-trace-base').then(commonJsExports),
    import('@opentelemetry/exporter-trace-otlp-http').then(commonJsExports),
    import('@opentelemetry/resources').then(commonJsExports),
  ]);
  const exporter = new OTLPTraceExporter({ url: `${endpoint.replace(/\/$/, '')}/v1/traces` });
  const provider = new sdk.BasicTracerProvider({
    resource: resourceFromAttributes({ 'service.name': serviceName }),
    spanProcessors: [new sdk.BatchSpanProcessor(exporter, { scheduledDelayMillis: 1000 })],
  });
  const tracer: Tracer = provider.getTracer(scope);
  const propagator = new W3CTraceContextPropagator();
  const getter = {
    keys: (carrier: Record<string, string>) => Object.keys(carrier),
    get: (carrier: Record<string, string>, key: string) => carrier[key],
  };
  const kinds: Record<NonNullable<SpanOptions['kind']>, SpanKind> = {
    internal: api.SpanKind.INTERNAL,
    server: api.SpanKind.SERVER,
    client: api.SpanKind.CLIENT,
    consumer: api.SpanKind.CONSUMER,
  };
  const start = (name: string, options: SpanOptions = {}): OpenSpan => {
    const parentHeader = validTraceparent(options.parent);
    const parent = parentHeader ? propagator.extract(api.ROOT_CONTEXT, { traceparent: parentHeader }, getter) : api.ROOT_CONTEXT;
    const span = tracer.startSpan(name, { kind: kinds[options.kind ?? 'internal'], attributes: options.attributes, startTime: options.startTime }, parent);
    const context = span.spanContext();
    return {
      traceparent: `00-${context.traceId}-${context.spanId}-${context.traceFlags.toString(16).padStart(2, '0')}`,
      set: (attributes) => span.setAttributes(attributes),
      end(error) {
        if (error !== undefined) {
          span.setStatus({ code: api.SpanStatusCode.ERROR, message: error instanceof Error ? error.message.slice(0, 500) : undefined });
          span.setAttribute('error.type', error instanceof Error ? error.name : 'error');
        }
        span.end();
      },
      raw: span,
    };
  };
  return {
    start,
    async inSpan(name, options, work) {
      const span = start(name, options);
      try {
        const result = await work(span);
        span.end();
        return result;
      } catch (error) {
        span.end(error);
        throw error;
      }
    },
    shutdown: () => provider.shutdown(),
  };
}
