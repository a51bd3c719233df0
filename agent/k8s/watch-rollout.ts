import { sleep } from '../claim-loop.ts';
import { type Cluster, ClusterError } from './cluster.ts';
import { deploymentSelector, type K8sObject, LABELS } from './labels.ts';
import { judgeRollout, type RolloutState } from './rollout.ts';

export type WatchOptions = {
  /** How often the cluster is read. */
  pollMs: number;
  /** When the rollout has not finished by then, it failed. */
  deadlineMs: number;
  signal: AbortSignal;
  /** Called when what the rollout waits for changes (for the deploy log). */
  onProgress: (waitingFor: string) => void;
};

/**
 * Reads the revision's workloads and pods until the rollout is live or failed (`judgeRollout`), or
 * its deadline passes. Polling, not a watch stream: each read stands alone, so an agent restarted
 * mid-rollout simply starts reading again.
 */
export async function watchRollout(
  cluster: Cluster,
  workloads: readonly K8sObject[],
  revisionId: string,
  options: WatchOptions,
): Promise<Exclude<RolloutState, { state: 'progressing' }>> {
  const deadline = Date.now() + options.deadlineMs;
  let last = '';
  for (;;) {
    options.signal.throwIfAborted();
    const state = await readRollout(cluster, workloads, revisionId);
    if (state.state !== 'progressing') return state;
    if (state.waitingFor !== last) {
      last = state.waitingFor;
      options.onProgress(last);
    }
    if (Date.now() >= deadline)
      return {
        state: 'failed',
        reason: `the rollout did not finish within ${options.deadlineMs >= 1000 ? `${Math.round(options.deadlineMs / 1000)} s` : `${options.deadlineMs} ms`}; still waiting for ${state.waitingFor}`,
      };
    await sleep(options.pollMs, options.signal);
  }
}

async function readRollout(cluster: Cluster, rendered: readonly K8sObject[], revisionId: string): Promise<RolloutState> {
  const stored: K8sObject[] = [];
  for (const workload of rendered) {
    const found = await cluster.read(workload.apiVersion, workload.kind, workload.metadata.namespace ?? '', workload.metadata.name);
    if (!found) return { state: 'progressing', waitingFor: `${workload.kind} ${workload.metadata.name} to exist` };
    if (found.metadata.labels?.[LABELS.revisionId] !== revisionId) {
      return {
        state: 'failed',
        reason: `${workload.kind} ${workload.metadata.name} now belongs to revision ${found.metadata.labels?.[LABELS.revisionId] ?? '(none)'}`,
      };
    }
    stored.push({ ...found, apiVersion: workload.apiVersion, kind: workload.kind });
  }
  const namespace = rendered[0]?.metadata.namespace ?? '';
  const deploymentId = rendered[0]?.metadata.labels?.[LABELS.deploymentId] ?? '';
  // Pods of this revision, and pods of the parts that do not roll with each revision (Redis and
  // PostgreSQL carry no revision label on their pods); earlier revisions' pods are not judged.
  const pods = (await listPods(cluster, namespace, deploymentId)).filter((pod) => {
    const revision = pod.metadata.labels?.[LABELS.revisionId];
    return revision === undefined || revision === revisionId;
  });
  return judgeRollout(stored, pods);
}

/**
 * The deployment's pods; none when the agent may not read pods (a Role without them): the rollout
 * is then judged by the workloads' status alone, and a pod that cannot pull its image shows only as
 * the rollout deadline.
 */
async function listPods(cluster: Cluster, namespace: string, deploymentId: string): Promise<K8sObject[]> {
  try {
    return await cluster.list('v1', 'Pod', namespace, deploymentSelector(deploymentId));
  } catch (error) {
    if (error instanceof ClusterError && error.code === 403) return [];
    throw error;
  }
}
