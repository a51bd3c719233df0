import type { AgentTracing } from './tracing.ts';

/** What `runUntilSignal` drives: a listener agent of any compute. */
export type StartableAgent = {
  start(): Promise<unknown>;
  /** Stops the agent for `signal` (absent: it could not start). */
  stop(signal?: 'SIGINT' | 'SIGTERM'): Promise<void>;
};

/**
 * Starts `agent` and stops it cleanly on SIGINT / SIGTERM, then exits; a second signal exits at
 * once. The handlers are installed before `start()`: starting (restoring live servers, reaching
 * the cluster) can take long, and a signal meanwhile must still stop what was started. The last
 * spans are sent before the process goes. A start that fails is said in one line, exit code 1.
 */
export async function runUntilSignal(agent: StartableAgent, tracing: Pick<AgentTracing, 'shutdown'>): Promise<void> {
  let stopping = false;
  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    process.on(signal, () => {
      if (stopping) {
        // The exit hook of processes.ts kills the process groups left.
        process.stderr.write(`agent: ${signal} again, exiting without waiting\n`);
        process.exit(1);
      }
      stopping = true;
      process.stderr.write(`agent: ${signal}: stopping\n`);
      agent
        .stop(signal)
        .then(() => tracing.shutdown().catch(() => undefined))
        .then(
          () => process.exit(0),
          () => process.exit(1),
        );
    });
  }
  try {
    await agent.start();
  } catch (error) {
    // Stopped by a signal while starting: the handler above finishes the stop and exits.
    if (stopping) return;
    process.stderr.write(`agent: could not start: ${error instanceof Error ? error.message : String(error)}\n`);
    await agent.stop().catch(() => undefined);
    process.exit(1);
  }
}
