import type { K8sObject } from './labels.ts';

/** Where a revision's rollout stands: still going, live, or failed with the reason. */
export type RolloutState = { state: 'progressing'; waitingFor: string } | { state: 'ready' } | { state: 'failed'; reason: string };

/** The pod states that mean the revision cannot come up by itself (contract §14). */
export const FAILING_POD_REASONS: ReadonlySet<string> = new Set(['ImagePullBackOff', 'ErrImagePull', 'CrashLoopBackOff']);

type WorkloadStatus = {
  observedGeneration?: number;
  replicas?: number;
  updatedReplicas?: number;
  availableReplicas?: number;
  readyReplicas?: number;
  conditions?: Array<{ type?: string; status?: string; reason?: string; message?: string }>;
};

type ContainerStatus = { name?: string; state?: { waiting?: { reason?: string; message?: string } } };
type PodStatus = { containerStatuses?: ContainerStatus[]; initContainerStatuses?: ContainerStatus[] };

/**
 * Judges a rollout from what the cluster shows: the revision's Deployments and StatefulSets as
 * read back, and its pods. Failure is looked for first, so a pod that cannot pull its image fails
 * the revision even while the old pods keep the Deployment's counts up.
 *
 * - A Deployment is rolled out when `status.observedGeneration` ≥ `metadata.generation` and its
 *   updated and available replicas equal its desired replicas; a StatefulSet when its ready ones do.
 * - It failed when a Deployment reports `ProgressDeadlineExceeded`, or a pod of the revision waits
 *   in `ImagePullBackOff`, `ErrImagePull` or `CrashLoopBackOff` (the reason and the pod's message).
 */
export function judgeRollout(workloads: readonly K8sObject[], pods: readonly K8sObject[]): RolloutState {
  for (const workload of workloads) {
    const status = (workload.status ?? {}) as WorkloadStatus;
    const stalled = status.conditions?.find((c) => c.type === 'Progressing' && c.status === 'False' && c.reason === 'ProgressDeadlineExceeded');
    if (stalled)
      return {
        state: 'failed',
        reason: `${workload.kind} ${workload.metadata.name}: ProgressDeadlineExceeded${stalled.message ? `: ${stalled.message}` : ''}`,
      };
  }
  for (const pod of pods) {
    const status = (pod.status ?? {}) as PodStatus;
    for (const container of [...(status.initContainerStatuses ?? []), ...(status.containerStatuses ?? [])]) {
      const waiting = container.state?.waiting;
      if (waiting?.reason && FAILING_POD_REASONS.has(waiting.reason)) {
        return {
          state: 'failed',
          reason: `pod ${pod.metadata.name}, container ${container.name ?? '?'}: ${waiting.reason}${waiting.message ? `: ${waiting.message}` : ''}`,
        };
      }
    }
  }
  for (const workload of workloads) {
    const waitingFor = notRolledOut(workload);
    if (waitingFor) return { state: 'progressing', waitingFor };
  }
  return { state: 'ready' };
}

/** What a workload still waits for, or null when it is rolled out. */
function notRolledOut(workload: K8sObject): string | null {
  const status = (workload.status ?? {}) as WorkloadStatus;
  const generation = (workload.metadata.generation as number | undefined) ?? 0;
  const desired = ((workload.spec as { replicas?: number } | undefined)?.replicas ?? 1) as number;
  const name = `${workload.kind} ${workload.metadata.name}`;
  if (workload.kind === 'StatefulSet') {
    // §14 judges a StatefulSet by its ready replicas; a generation it has reported but not yet
    // reached still means its ready pods may be the previous template's.
    if (status.observedGeneration !== undefined && status.observedGeneration < generation) return `${name}: generation ${generation} not observed yet`;
    const ready = status.readyReplicas ?? 0;
    return ready === desired ? null : `${name}: ${ready}/${desired} ready`;
  }
  if ((status.observedGeneration ?? 0) < generation) return `${name}: generation ${generation} not observed yet`;
  const updated = status.updatedReplicas ?? 0;
  const available = status.availableReplicas ?? 0;
  if (updated !== desired || available !== desired) return `${name}: ${updated}/${desired} updated, ${available}/${desired} available`;
  return null;
}
