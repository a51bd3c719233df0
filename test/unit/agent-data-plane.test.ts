import { afterEach, describe, expect, it } from 'vitest';
import { AgentDataPlane } from '../../server/dataplane/listener-agent.ts';
import { systemClock } from '../../server/lib/clock.ts';
import { RevisionWatch } from '../../server/lib/revision-watch.ts';
import { createLogger } from '../../server/logger.ts';
import type { DeploymentRecord, RevisionWork } from '../../server/store/types.ts';
import { openTestBackend } from '../helpers/backends.ts';

/**
 * The listener agents' data plane starts reads nobody waits for (waking a listener's agents when a
 * revision or a teardown is handed to it). A read that fails (here: a real SQLite backend closed
 * under it, as at a shutdown right after a create) must be logged, never left as an unhandled
 * rejection, which ends a Node process. CI once caught exactly that one.
 */
describe('the agent data plane when its database fails', () => {
  const rejections: unknown[] = [];
  const onRejection = (reason: unknown) => rejections.push(reason);
  afterEach(() => {
    process.off('unhandledRejection', onRejection);
  });

  it('logs a wake-up it could not make, and rejects nothing unhandled', async () => {
    const backend = await openTestBackend('sqlite');
    const lines: string[] = [];
    const plane = new AgentDataPlane({
      agents: backend.agents,
      wake: new RevisionWatch(),
      clock: systemClock,
      log: createLogger('warn', (line) => lines.push(line)),
      leaseMs: 60_000,
    });
    await backend.close();
    process.on('unhandledRejection', onRejection);
    const deployment = { id: crypto.randomUUID() } as DeploymentRecord;
    plane.run({ id: crypto.randomUUID() } as RevisionWork, deployment);
    void plane.teardown(deployment);
    // Unhandled rejections are reported after the microtask queue drains; give them a few turns.
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(rejections).toEqual([]);
    const messages = lines.map((line) => (JSON.parse(line) as { msg: string }).msg);
    expect(messages.filter((msg) => msg.startsWith("could not wake a listener's agents"))).toHaveLength(2);
    expect(messages).toContain('reading a teardown report failed; the next sweep reads it again');
    plane.stop();
  });
});
