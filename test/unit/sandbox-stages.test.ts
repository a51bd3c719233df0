import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { describe, expect, it } from 'vitest';
import { SandboxDataPlane } from '../../server/dataplane/sandbox.ts';
import { silentLogger } from '../../server/logger.ts';
import type { DeploymentRecord, RevisionRecord, RevisionTransition, RevisionWork } from '../../server/store/types.ts';
import { eventually } from '../helpers/api.ts';

setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;

/**
 * The sandbox's revisions wait out their stages in one queue served by one timer (every stage
 * lasts SANDBOX_STAGE_MS). Each must still wait its own full stage, whenever it began, and an
 * interrupted one must stop; stopping the sandbox drops the waiting ones. While it waits, a
 * revision must not keep its records alive: the revision handed over carries its secrets
 * decrypted, and ~2.5 KB a revision of records held for 60,000 simulated builds (as the hot-path
 * benchmark holds) is 150 MB. Only what the remaining stages need stays (the sandbox's StagePlan).
 */
function revision(status: RevisionWork['status']): RevisionWork {
  return {
    id: crypto.randomUUID(),
    deployment_id: crypto.randomUUID(),
    status,
    source_revision_config: { repo_ref: 'main', graph_config_path: 'langgraph.json', image_uri: null, source_tarball_path: null, repo_commit_sha: null },
    resource_spec: null,
    secrets: [{ name: 'OPENAI_API_KEY', value: 'sk-decrypted-secret' }],
  } as unknown as RevisionWork;
}
const deployment = {
  id: crypto.randomUUID(),
  name: 'queued',
  source: 'github',
  source_config: { repo_url: 'https://github.com/acme/agent', listener_id: null },
} as unknown as DeploymentRecord;

/** A stage control that records each step's time, and refuses steps of the revisions in `interrupted`. */
function recorder() {
  const steps = new Map<string, Array<{ to: string; at: number }>>();
  const interrupted = new Set<string>();
  const control = {
    transition: async (change: RevisionTransition) => {
      if (interrupted.has(change.revisionId)) return null;
      const list = steps.get(change.revisionId) ?? [];
      list.push({ to: change.to, at: performance.now() });
      steps.set(change.revisionId, list);
      return { id: change.revisionId, status: change.to } as RevisionRecord;
    },
    log: async () => {},
  };
  return { steps, interrupted, control };
}

describe('sandbox: the stage queue', () => {
  it('keeps neither the revision it was handed (secrets decrypted) nor its deployment while it waits', async () => {
    const sandbox = new SandboxDataPlane({ stageMs: 3_600_000, log: silentLogger });
    const { steps, control } = recorder();
    let revisionRef: WeakRef<object> | undefined;
    let deploymentRef: WeakRef<object> | undefined;
    let id = '';
    (() => {
      const handed = revision('AWAITING_BUILD');
      const itsDeployment = { ...deployment, id: handed.deployment_id } as DeploymentRecord;
      id = handed.id;
      revisionRef = new WeakRef(handed);
      deploymentRef = new WeakRef(itsDeployment);
      sandbox.run(handed, itsDeployment, control);
    })();
    try {
      // The first step is taken, then the build stage waits for an hour.
      await new Promise((resolve) => setTimeout(resolve, 50));
      expect(steps.get(id)!.map((s) => s.to)).toEqual(['BUILDING']);
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

  it('gives each of 60 revisions, handed over at different moments, its own full stages', async () => {
    const stageMs = 80;
    const sandbox = new SandboxDataPlane({ stageMs, log: silentLogger });
    const { steps, control } = recorder();
    const started = new Map<string, number>();
    try {
      for (let i = 0; i < 60; i += 1) {
        const r = revision(i % 2 ? 'AWAITING_BUILD' : 'AWAITING_DEPLOY');
        started.set(r.id, performance.now());
        sandbox.run(r, deployment, control);
        if (i % 10 === 9) await new Promise((resolve) => setTimeout(resolve, 25));
      }
      await eventually(async () => ([...started.keys()].every((id) => steps.get(id)?.at(-1)?.to === 'DEPLOYED') ? true : undefined), 10_000);
      for (const [id, at] of started) {
        const list = steps.get(id)!;
        // Each stage's end comes at least a stage after it began (timers never fire early; 1 ms of rounding allowed).
        const building = list.find((s) => s.to === 'BUILDING');
        if (building) expect(list.find((s) => s.to === 'AWAITING_DEPLOY')!.at - building.at).toBeGreaterThanOrEqual(stageMs - 1);
        const deploying = list.find((s) => s.to === 'DEPLOYING')!;
        expect(list.find((s) => s.to === 'DEPLOYED')!.at - deploying.at).toBeGreaterThanOrEqual(stageMs - 1);
        expect(deploying.at).toBeGreaterThanOrEqual(at);
      }
    } finally {
      sandbox.stop();
    }
  });

  it('an interrupted revision stops at its next step; stopping the sandbox drops the revisions still waiting', async () => {
    const stageMs = 60;
    const sandbox = new SandboxDataPlane({ stageMs, log: silentLogger });
    const { steps, interrupted, control } = recorder();
    const [a, b, c] = [revision('AWAITING_BUILD'), revision('AWAITING_BUILD'), revision('AWAITING_BUILD')];
    for (const r of [a, b]) sandbox.run(r, deployment, control);
    await new Promise((resolve) => setTimeout(resolve, 10));
    interrupted.add(a.id);
    await eventually(async () => (steps.get(b.id)?.at(-1)?.to === 'DEPLOYED' ? true : undefined), 10_000);
    expect(steps.get(b.id)!.map((s) => s.to)).toEqual(['BUILDING', 'AWAITING_DEPLOY', 'DEPLOYING', 'DEPLOYED']);
    // a's stage ended with b's (handed over together): its step was refused, and it went no further.
    expect(steps.get(a.id)!.map((s) => s.to)).toEqual(['BUILDING']);
    sandbox.run(c, deployment, control);
    await new Promise((resolve) => setTimeout(resolve, 10));
    sandbox.stop();
    await new Promise((resolve) => setTimeout(resolve, stageMs + 100));
    expect(steps.get(c.id)!.map((s) => s.to)).toEqual(['BUILDING']);
  });
});
