import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { describe, expect, it } from 'vitest';
import { SandboxDataPlane } from '../../server/dataplane/sandbox.ts';
import { silentLogger } from '../../server/logger.ts';
import type { DeploymentRecord, RevisionRecord, RevisionWork } from '../../server/store/types.ts';

setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;

/**
 * A revision waits a whole stage in the sandbox, every revision in progress at once. While it
 * waits it must not keep its records alive: the revision handed over carries its secrets
 * decrypted, and ~2.5 KB a revision of records held 60,000 simulated builds' worth of memory in
 * issue 13's benchmark. Only what the remaining stages need stays (the sandbox's StagePlan).
 */
describe('sandbox: a waiting revision', () => {
  it('keeps neither the revision it was handed (secrets decrypted) nor its deployment while it waits', async () => {
    const sandbox = new SandboxDataPlane({ stageMs: 3_600_000, log: silentLogger });
    const transitions: string[] = [];
    const control = {
      transition: async (change: { revisionId: string; to: string }) => {
        transitions.push(change.to);
        return { id: change.revisionId, status: change.to } as RevisionRecord;
      },
      log: async () => {},
    };
    let revisionRef: WeakRef<object> | undefined;
    let deploymentRef: WeakRef<object> | undefined;
    (() => {
      const revision = {
        id: crypto.randomUUID(),
        deployment_id: crypto.randomUUID(),
        status: 'AWAITING_BUILD',
        source_revision_config: { repo_ref: 'main', graph_config_path: 'langgraph.json', image_uri: null, source_tarball_path: null, repo_commit_sha: null },
        resource_spec: null,
        secrets: [{ name: 'OPENAI_API_KEY', value: 'sk-decrypted-secret' }],
      } as unknown as RevisionWork;
      const deployment = { id: revision.deployment_id, name: 'held', source: 'github', source_config: { repo_url: 'https://github.com/acme/agent', listener_id: null } } as unknown as DeploymentRecord;
      revisionRef = new WeakRef(revision);
      deploymentRef = new WeakRef(deployment);
      sandbox.run(revision, deployment, control);
    })();
    try {
      // The first step is taken, then the build stage waits for an hour.
      await new Promise((resolve) => setTimeout(resolve, 50));
      expect(transitions).toEqual(['BUILDING']);
      for (let i = 0; i < 3; i += 1) {
        gc();
        await new Promise((resolve) => setImmediate(resolve));
      }
      expect(revisionRef!.deref()).toBeUndefined();
      expect(deploymentRef!.deref()).toBeUndefined();
    } finally {
      sandbox.stop();
    }
  });
});
