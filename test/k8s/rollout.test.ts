import { describe, expect, it } from 'vitest';
import type { K8sObject } from '../../agent/k8s/labels.ts';
import { judgeRollout } from '../../agent/k8s/rollout.ts';

/** The rollout verdict from what the cluster shows (contract §14), on objects shaped as the API returns them. */
const deployment = (name: string, generation: number, spec: { replicas?: number }, status: Record<string, unknown>): K8sObject => ({
  apiVersion: 'apps/v1',
  kind: 'Deployment',
  metadata: { name, generation },
  spec,
  status,
});
const statefulSet = (status: Record<string, unknown>): K8sObject => ({
  apiVersion: 'apps/v1',
  kind: 'StatefulSet',
  metadata: { name: 'db', generation: 1 },
  spec: { replicas: 1 },
  status,
});
const pod = (name: string, waiting?: { reason: string; message?: string }, init = false): K8sObject => ({
  apiVersion: 'v1',
  kind: 'Pod',
  metadata: { name },
  status: { [init ? 'initContainerStatuses' : 'containerStatuses']: [{ name: 'c', state: waiting ? { waiting } : { running: {} } }] },
});

describe('judgeRollout', () => {
  const ready = deployment('api', 2, { replicas: 2 }, { observedGeneration: 2, replicas: 2, updatedReplicas: 2, availableReplicas: 2 });
  const db = statefulSet({ observedGeneration: 1, readyReplicas: 1 });

  it('ready when every Deployment observed its generation with updated and available = desired, and the StatefulSet is ready', () => {
    expect(judgeRollout([ready, db], [pod('api-1'), pod('api-2')])).toEqual({ state: 'ready' });
  });

  it('progressing while a generation is not observed, replicas are not all updated or available, or the StatefulSet is not ready', () => {
    expect(judgeRollout([deployment('api', 3, { replicas: 2 }, { observedGeneration: 2, updatedReplicas: 2, availableReplicas: 2 })], [])).toEqual({
      state: 'progressing',
      waitingFor: 'Deployment api: generation 3 not observed yet',
    });
    expect(judgeRollout([deployment('api', 2, { replicas: 2 }, { observedGeneration: 2, updatedReplicas: 1, availableReplicas: 2 })], [])).toEqual({
      state: 'progressing',
      waitingFor: 'Deployment api: 1/2 updated, 2/2 available',
    });
    // Old pods still up beside the new ones: more available than desired is not done either.
    expect(judgeRollout([deployment('api', 2, { replicas: 2 }, { observedGeneration: 2, updatedReplicas: 2, availableReplicas: 3 })], []).state).toBe(
      'progressing',
    );
    expect(judgeRollout([ready, statefulSet({ observedGeneration: 1, readyReplicas: 0 })], [])).toEqual({
      state: 'progressing',
      waitingFor: 'StatefulSet db: 0/1 ready',
    });
    expect(judgeRollout([ready, { ...statefulSet({ observedGeneration: 1, readyReplicas: 1 }), metadata: { name: 'db', generation: 2 } }], [])).toEqual({
      state: 'progressing',
      waitingFor: 'StatefulSet db: generation 2 not observed yet',
    });
    // A StatefulSet is judged by its ready replicas (§14): one whose controller reports no generation yet counts when ready.
    expect(judgeRollout([ready, statefulSet({ readyReplicas: 1 })], [])).toEqual({ state: 'ready' });
  });

  it("failed on ProgressDeadlineExceeded, with the condition's message", () => {
    const stalled = deployment(
      'api',
      2,
      { replicas: 2 },
      {
        observedGeneration: 2,
        conditions: [{ type: 'Progressing', status: 'False', reason: 'ProgressDeadlineExceeded', message: 'ReplicaSet "api-7d" has timed out progressing.' }],
      },
    );
    expect(judgeRollout([stalled], [])).toEqual({
      state: 'failed',
      reason: 'Deployment api: ProgressDeadlineExceeded: ReplicaSet "api-7d" has timed out progressing.',
    });
  });

  it('failed on a pod in ImagePullBackOff, ErrImagePull or CrashLoopBackOff (also an init container), naming the pod and the message, even while counts look fine', () => {
    for (const reason of ['ImagePullBackOff', 'ErrImagePull', 'CrashLoopBackOff']) {
      expect(judgeRollout([ready], [pod('api-x', { reason, message: 'the message' })])).toEqual({
        state: 'failed',
        reason: `pod api-x, container c: ${reason}: the message`,
      });
    }
    expect(judgeRollout([ready], [pod('api-y', { reason: 'ErrImagePull' }, true)]).state).toBe('failed');
  });

  it('other waiting reasons (ContainerCreating, PodInitializing) are progress, not failure', () => {
    expect(judgeRollout([ready, db], [pod('api-z', { reason: 'ContainerCreating' })])).toEqual({ state: 'ready' });
    expect(judgeRollout([deployment('api', 1, { replicas: 1 }, { observedGeneration: 1 })], [pod('api-z', { reason: 'PodInitializing' })]).state).toBe(
      'progressing',
    );
  });
});
