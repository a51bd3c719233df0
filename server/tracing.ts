import { type OpenSpan, type OtlpTracing, startOtlpTracing } from '../shared/otel.ts';

/** A revision as its transition span names it. */
type ChangedRevision = { id: string; deployment_id: string; status: string };

/**
 * The server's spans (contract §17): one per HTTP request, per webhook delivery processed, per
 * GitHub call, and per revision status change. Undefined wherever tracing is off, so each call
 * site pays one check.
 */
export type Tracing = {
  /** Starts the span of one request, child of the caller's `traceparent`; `end` names it by the route's template. */
  startRequest(method: string, traceparent: string | undefined): { traceparent: string; end(route: string, status: number): void };
  /** A span around `work` (webhook processing, a GitHub call). */
  inSpan: OtlpTracing['inSpan'];
  /**
   * A revision entered a status: one span, child of the trace context stored with the revision
   * (the request or delivery that made it), so a revision's stages line up under the request.
   */
  revisionChanged(revision: ChangedRevision, traceparent: string | undefined): void;
  /** Sends what is buffered and stops exporting. */
  shutdown(): Promise<void>;
};

/**
 * OpenTelemetry traces, exported with OTLP/HTTP to `endpoint` (OTEL_EXPORTER_OTLP_ENDPOINT). The
 * SDK is loaded only here, when an endpoint is set: without one nothing of it is imported.
 */
export async function startTracing(endpoint: string, serviceName: string): Promise<Tracing> {
  const otlp = await startOtlpTracing(endpoint, serviceName, 'agent-control-plane');
  return {
    startRequest(method, traceparent) {
      const span: OpenSpan = otlp.start(method, { kind: 'server', parent: traceparent, attributes: { 'http.request.method': method } });
      return {
        traceparent: span.traceparent,
        end(route, status) {
          // Named and labelled by the route's template (OpenTelemetry's HTTP conventions), never its path.
          span.raw.updateName(`${method} ${route}`);
          span.set({ 'http.route': route, 'http.response.status_code': status });
          span.end(status >= 500 ? new Error(`HTTP ${status}`) : undefined);
        },
      };
    },
    inSpan: otlp.inSpan,
    revisionChanged(revision, traceparent) {
      otlp
        .start(`revision ${revision.status}`, {
          parent: traceparent,
          attributes: { 'acp.revision.id': revision.id, 'acp.deployment.id': revision.deployment_id, 'acp.revision.status': revision.status },
        })
        .end();
    },
    shutdown: otlp.shutdown,
  };
}
