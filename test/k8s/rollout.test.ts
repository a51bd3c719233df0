import { describe, expect, it } from 'vitest';
import type { K8sObject } from '../../agent/k8s/labels.ts';
import { judgeRollout } from '../../agent/k8s/rollout.ts';

/** The rollout verdict from what the cluster shows (contract §18), on objects shaped as the API returns them. */
const deployment = (name: string, generation: number, spec: { replicas?: number }, status: Record<string, unknown>): K8sObject => ({
  apiVersion: 'apps/v1',
  kind: 'Deployment',
  metadata: { name, generation },
  spec,
  status,
});
const statefulSet = (status: Record<string, unknown>, generation = 1): K8sObject => ({
  apiVersion: 'apps/v1',
  kind: 'StatefulSet',
  metadata: { name: 'db', generation },
  spec: { replicas: 1 },
  status,
});
const pod = (name: string, waiting?: { reason: string; message?: string }, init = false, restartCount = 0): K8sObject => ({
  apiVersion: 'v1',
  kind: 'Pod',
  metadata: { name },
  status: { [init ? 'initContainerStatuses' : 'containerStatuses']: [{ name: 'c', restartCount, state: waiting ? { waiting } : { running: {} } }] },
});

describe('judgeRollout (contract §18: the rule of kubectl rollout status)', () => {
  const ready = deployment('api', 2, { replicas: 2 }, { observedGeneration: 2, replicas: 2, updatedReplicas: 2, availableReplicas: 2 });
  const db = statefulSet({ observedGeneration: 1, replicas: 1, readyReplicas: 1, updatedReplicas: 1, currentRevision: 'db-a', updateRevision: 'db-a' });

  it('ready when every Deployment observed its generation with updated = replicas = available = desired, and the StatefulSet is on its update revision and ready', () => {
    expect(judgeRollout([ready, db], [pod('api-1'), pod('api-2')])).toEqual({ state: 'ready' });
  });

  it('the status a real Deployment reports mid-update (replicas 2, updated 1, available 1, the new pod ContainerCreating) is not done', () => {
    const mid = deployment('api', 2, { replicas: 1 }, { observedGeneration: 2, replicas: 2, updatedReplicas: 1, availableReplicas: 1 });
    expect(judgeRollout([mid], [pod('api-new', { reason: 'ContainerCreating' })])).toEqual({
      state: 'progressing',
      waitingFor: 'Deployment api: 1 old pod still terminating',
    });
  });

  it('progressing while a generation is not observed, replicas are not all updated or available, or old pods remain', () => {
    expect(judgeRollout([deployment('api', 3, { replicas: 2 }, { observedGeneration: 2, replicas: 2, updatedReplicas: 2, availableReplicas: 2 })], [])).toEqual(
      {
        state: 'progressing',
        waitingFor: 'Deployment api: generation 3 not observed yet',
      },
    );
    expect(judgeRollout([deployment('api', 2, { replicas: 2 }, { observedGeneration: 2, replicas: 3, updatedReplicas: 1, availableReplicas: 2 })], [])).toEqual(
      {
        state: 'progressing',
        waitingFor: 'Deployment api: 1/2 updated',
      },
    );
    expect(judgeRollout([deployment('api', 2, { replicas: 2 }, { observedGeneration: 2, replicas: 2, updatedReplicas: 2, availableReplicas: 1 })], [])).toEqual(
      {
        state: 'progressing',
        waitingFor: 'Deployment api: 1/2 available',
      },
    );
  });

  it('a StatefulSet: not done while updateRevision differs from currentRevision (its old pod may still be ready), nor before its pods are ready', () => {
    const rolling = statefulSet(
      { observedGeneration: 2, replicas: 1, readyReplicas: 1, updatedReplicas: 0, currentRevision: 'db-a', updateRevision: 'db-b' },
      2,
    );
    expect(judgeRollout([ready, rolling], [])).toEqual({ state: 'progressing', waitingFor: 'StatefulSet db: 0/1 pods updated to revision db-b' });
    const starting = statefulSet({ observedGeneration: 1, replicas: 1, readyReplicas: 0, updatedReplicas: 1, currentRevision: 'db-a', updateRevision: 'db-a' });
    expect(judgeRollout([ready, starting], [])).toEqual({ state: 'progressing', waitingFor: 'StatefulSet db: 0/1 ready' });
    expect(judgeRollout([ready, { ...db, metadata: { name: 'db', generation: 2 } }], [])).toEqual({
      state: 'progressing',
      waitingFor: 'StatefulSet db: generation 2 not observed yet',
    });
  });

  it("failed on ReplicaFailure (FailedCreate: Pod Security, a quota, a missing service account) and on ProgressDeadlineExceeded, with the condition's message", () => {
    const refused = deployment(
      'api',
      2,
      { replicas: 2 },
      {
        observedGeneration: 2,
        conditions: [
          { type: 'ReplicaFailure', status: 'True', reason: 'FailedCreate', message: 'pods "api-x" is forbidden: violates PodSecurity "restricted:latest"' },
        ],
      },
    );
    expect(judgeRollout([refused], [])).toEqual({
      state: 'failed',
      reason: 'Deployment api: ReplicaFailure FailedCreate: pods "api-x" is forbidden: violates PodSecurity "restricted:latest"',
    });
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

  it('failed on a pod that cannot start (pull errors, InvalidImageName, CreateContainerConfigError; also an init container), naming the pod and the message, even while counts look fine', () => {
    for (const reason of ['ImagePullBackOff', 'ErrImagePull', 'InvalidImageName', 'CreateContainerConfigError']) {
      expect(judgeRollout([ready], [pod('api-x', { reason, message: 'the message' })])).toEqual({
        state: 'failed',
        reason: `pod api-x, container c: ${reason}: the message`,
      });
    }
    expect(judgeRollout([ready], [pod('api-y', { reason: 'ErrImagePull' }, true)]).state).toBe('failed');
  });

  it('CrashLoopBackOff fails only after 3 restarts (an image waiting for its database comes up)', () => {
    const crashing = (restarts: number) => pod('api-c', { reason: 'CrashLoopBackOff', message: 'back-off 20s' }, false, restarts);
    expect(judgeRollout([ready], [crashing(2)]).state).toBe('ready');
    expect(judgeRollout([ready], [crashing(3)])).toEqual({
      state: 'failed',
      reason: 'pod api-c, container c: CrashLoopBackOff after 3 restarts: back-off 20s',
    });
  });

  it('failed on an Unschedulable pod, with the scheduler’s message', () => {
    const pending: K8sObject = {
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name: 'api-p' },
      status: {
        phase: 'Pending',
        conditions: [{ type: 'PodScheduled', status: 'False', reason: 'Unschedulable', message: '0/3 nodes are available: 3 Insufficient cpu.' }],
      },
    };
    expect(judgeRollout([ready], [pending])).toEqual({ state: 'failed', reason: 'pod api-p: Unschedulable: 0/3 nodes are available: 3 Insufficient cpu.' });
  });

  it('other waiting reasons (ContainerCreating, PodInitializing) are progress, not failure', () => {
    expect(judgeRollout([ready, db], [pod('api-z', { reason: 'ContainerCreating' })])).toEqual({ state: 'ready' });
    expect(judgeRollout([deployment('api', 1, { replicas: 1 }, { observedGeneration: 1 })], [pod('api-z', { reason: 'PodInitializing' })]).state).toBe(
      'progressing',
    );
  });
});
