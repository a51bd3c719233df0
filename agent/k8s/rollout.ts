import type { K8sObject } from './labels.ts';

/** Where a revision's rollout stands: still going, live, or failed with the reason. */
export type RolloutState = { state: 'progressing'; waitingFor: string } | { state: 'ready' } | { state: 'failed'; reason: string };

/** The waiting reasons that mean a pod of the revision cannot come up by itself (contract §18). */
export const FAILING_POD_REASONS: ReadonlySet<string> = new Set([
  'ImagePullBackOff',
  'ErrImagePull',
  'InvalidImageName',
  'CreateContainerConfigError',
  'CreateContainerError',
  'CrashLoopBackOff',
]);

/**
 * A container in `CrashLoopBackOff` fails the revision only after this many restarts: an image
 * that exits while PostgreSQL or Redis are still starting comes up once they are (contract §18).
 */
export const CRASH_LOOP_RESTARTS = 3;

type Condition = { type?: string; status?: string; reason?: string; message?: string };

type WorkloadStatus = {
  observedGeneration?: number;
  replicas?: number;
  updatedReplicas?: number;
  availableReplicas?: number;
  readyReplicas?: number;
  currentRevision?: string;
  updateRevision?: string;
  conditions?: Condition[];
};

type ContainerStatus = { name?: string; restartCount?: number; state?: { waiting?: { reason?: string; message?: string } } };
type PodStatus = { conditions?: Condition[]; containerStatuses?: ContainerStatus[]; initContainerStatuses?: ContainerStatus[] };

/**
 * Judges a rollout from what the cluster shows: the revision's Deployments and StatefulSets as
 * read back, and its pods. Failure is looked for first, so a pod that cannot start fails the
 * revision even while the old pods keep the Deployment's counts up.
 *
 * - Rolled out (the rule of `kubectl rollout status`): a Deployment when `observedGeneration` ≥
 *   `generation` and `updatedReplicas` = `replicas` = `availableReplicas` = `spec.replicas` (no pod
 *   of an older ReplicaSet left); a StatefulSet when it observed its generation,
 *   `currentRevision` = `updateRevision` and `readyReplicas` = `updatedReplicas` = `spec.replicas`.
 * - Failed: a workload's `ReplicaFailure` condition (`FailedCreate`: Pod Security, a quota, a missing
 *   service account) or `ProgressDeadlineExceeded`; a pod of the revision `Unschedulable`, or
 *   waiting in one of `FAILING_POD_REASONS` (`CrashLoopBackOff` only after `CRASH_LOOP_RESTARTS`).
 */
export function judgeRollout(workloads: readonly K8sObject[], pods: readonly K8sObject[]): RolloutState {
  for (const workload of workloads) {
    const status = (workload.status ?? {}) as WorkloadStatus;
    const name = `${workload.kind} ${workload.metadata.name}`;
    const refused = status.conditions?.find((c) => c.type === 'ReplicaFailure' && c.status === 'True');
    if (refused) return { state: 'failed', reason: `${name}: ReplicaFailure ${refused.reason ?? ''}${refused.message ? `: ${refused.message}` : ''}` };
    const stalled = status.conditions?.find((c) => c.type === 'Progressing' && c.status === 'False' && c.reason === 'ProgressDeadlineExceeded');
    if (stalled) return { state: 'failed', reason: `${name}: ProgressDeadlineExceeded${stalled.message ? `: ${stalled.message}` : ''}` };
  }
  for (const pod of pods) {
    const failure = podFailure(pod);
    if (failure) return { state: 'failed', reason: `pod ${pod.metadata.name}${failure}` };
  }
  for (const workload of workloads) {
    const waitingFor = notRolledOut(workload);
    if (waitingFor) return { state: 'progressing', waitingFor };
  }
  return { state: 'ready' };
}

/** Why a pod cannot come up by itself (`, container x: Reason: message`), or null. */
function podFailure(pod: K8sObject): string | null {
  const status = (pod.status ?? {}) as PodStatus;
  const unschedulable = status.conditions?.find((c) => c.type === 'PodScheduled' && c.status === 'False' && c.reason === 'Unschedulable');
  if (unschedulable) return `: Unschedulable${unschedulable.message ? `: ${unschedulable.message}` : ''}`;
  for (const container of [...(status.initContainerStatuses ?? []), ...(status.containerStatuses ?? [])]) {
    const waiting = container.state?.waiting;
    if (!waiting?.reason || !FAILING_POD_REASONS.has(waiting.reason)) continue;
    if (waiting.reason === 'CrashLoopBackOff' && (container.restartCount ?? 0) < CRASH_LOOP_RESTARTS) continue;
    const restarts = waiting.reason === 'CrashLoopBackOff' ? ` after ${container.restartCount} restarts` : '';
    return `, container ${container.name ?? '?'}: ${waiting.reason}${restarts}${waiting.message ? `: ${waiting.message}` : ''}`;
  }
  return null;
}

/** What a workload still waits for, or null when it is rolled out. */
function notRolledOut(workload: K8sObject): string | null {
  const status = (workload.status ?? {}) as WorkloadStatus;
  const generation = (workload.metadata.generation as number | undefined) ?? 0;
  const desired = ((workload.spec as { replicas?: number } | undefined)?.replicas ?? 1) as number;
  const name = `${workload.kind} ${workload.metadata.name}`;
  if ((status.observedGeneration ?? 0) < generation) return `${name}: generation ${generation} not observed yet`;
  const updated = status.updatedReplicas ?? 0;
  if (workload.kind === 'StatefulSet') {
    const ready = status.readyReplicas ?? 0;
    if (status.updateRevision !== status.currentRevision || updated !== desired)
      return `${name}: ${updated}/${desired} pods updated to revision ${status.updateRevision ?? '?'}`;
    return ready === desired ? null : `${name}: ${ready}/${desired} ready`;
  }
  const available = status.availableReplicas ?? 0;
  const total = status.replicas ?? 0;
  if (updated !== desired) return `${name}: ${updated}/${desired} updated`;
  if (total !== updated) return `${name}: ${total - updated} old pod${total - updated === 1 ? '' : 's'} still terminating`;
  if (available !== desired) return `${name}: ${available}/${desired} available`;
  return null;
}
