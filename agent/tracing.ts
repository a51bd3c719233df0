import { startOtlpTracing } from '../shared/otel.ts';

/** The revision a step works on: its id, and the trace context the control plane gave with the work. */
type TracedRevision = { id: string; traceparent?: string | null };

/**
 * The agents' spans (contract §17): one per step of a revision's work (install, build, start; a k8s
 * agent's apply and rollout), children of the trace context the work item carries, so they join
 * the trace of the request that made the revision.
 */
export type AgentTracing = {
  /** `failure`: what makes a step that answered a failed one (a command's exit code), marked on its span. */
  step<T>(name: string, revision: TracedRevision, work: () => Promise<T>, failure?: (value: T) => string | null): Promise<T>;
  /** Sends what is buffered (at the agent's stop). */
  shutdown(): Promise<void>;
};

/** Tracing off: each step is its work, nothing else. */
export const NO_TRACING: AgentTracing = { step: (_name, _revision, work) => work(), shutdown: async () => {} };

/**
 * The agent's tracing from its environment, as the server's: spans exported with OTLP/HTTP to
 * `OTEL_EXPORTER_OTLP_ENDPOINT` (service `OTEL_SERVICE_NAME`, else `serviceName`) when it is set;
 * off otherwise, with the SDK never loaded.
 */
export async function agentTracing(env: NodeJS.ProcessEnv, serviceName: string): Promise<AgentTracing> {
  const endpoint = env.OTEL_EXPORTER_OTLP_ENDPOINT;
  if (!endpoint) return NO_TRACING;
  if (!/^https?:\/\//.test(endpoint) || !URL.canParse(endpoint)) {
    throw new Error(`OTEL_EXPORTER_OTLP_ENDPOINT must be an http(s) URL, e.g. http://collector:4318 (got ${JSON.stringify(endpoint)})`);
  }
  const otlp = await startOtlpTracing(endpoint, env.OTEL_SERVICE_NAME || serviceName, serviceName);
  return {
    step: (name, revision, work, failure) =>
      otlp.inSpan(name, { parent: revision.traceparent, attributes: { 'acp.revision.id': revision.id } }, async (span) => {
        const value = await work();
        const failed = failure?.(value);
        if (failed) span.set({ 'error.type': failed });
        return value;
      }),
    shutdown: () => otlp.shutdown(),
  };
}

/** A finished command's failure as a span's `error.type` (a limit, a signal, an exit code), or null. */
export function commandFailure(result: { code: number | null; signal?: string | null; limit?: string | null; aborted?: boolean }): string | null {
  if (result.limit) return 'limit';
  if (result.aborted) return 'aborted';
  if (result.code === null) return result.signal ?? 'signal';
  return result.code === 0 ? null : `exit ${result.code}`;
}

/** `agentTracing` for an agent's command line: a bad endpoint is said on stderr and exits 2, as a bad flag does. */
export async function tracingOrExit(env: NodeJS.ProcessEnv, serviceName: string): Promise<AgentTracing> {
  try {
    return await agentTracing(env, serviceName);
  } catch (error) {
    process.stderr.write(`agent: ${(error as Error).message}\n`);
    process.exit(2);
  }
}
