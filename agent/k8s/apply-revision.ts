import type { Cluster } from './cluster.ts';
import { RENDERED_KINDS } from './cluster.ts';
import { deploymentSelector, type K8sObject, LABELS } from './labels.ts';

/**
 * Applies the revision's objects (server-side apply, field manager `agent-control-plane`, forced),
 * unless every one of them is already in the cluster labelled with this revision: then an agent
 * that was stopped mid-rollout has applied them, and the work goes on by watching, without another
 * write (which would bump nothing, but would also re-create what an operator deleted meanwhile).
 * Answers whether it found them applied.
 */
export async function applyRevision(cluster: Cluster, objects: readonly K8sObject[], revisionId: string, signal: AbortSignal): Promise<{ resumed: boolean }> {
  let applied = 0;
  for (const object of objects) {
    const stored = await cluster.read(object.apiVersion, object.kind, object.metadata.namespace ?? '', object.metadata.name);
    if (stored?.metadata.labels?.[LABELS.revisionId] === revisionId) applied += 1;
    else break;
  }
  if (applied === objects.length) return { resumed: true };
  // What others refer to first (Secrets, Services), so a pod never starts before its Secret exists.
  const rank = (o: K8sObject) => RENDERED_KINDS.findIndex((k) => k.kind === o.kind && k.apiVersion === o.apiVersion);
  for (const object of [...objects].sort((a, b) => rank(a) - rank(b))) {
    signal.throwIfAborted();
    await cluster.apply(object);
  }
  return { resumed: false };
}

/**
 * Deletes the deployment's objects that the live revision no longer renders: every one of them is
 * re-applied with the live revision's label, so any other revision label marks one left behind
 * (an autoscaler after `max_scale` came down to `min_scale`). Volume claims are not among them:
 * they belong to the StatefulSet and go at teardown. Answers what it deleted.
 */
export async function pruneEarlier(cluster: Cluster, namespace: string, deploymentId: string, revisionId: string): Promise<string[]> {
  const deleted: string[] = [];
  for (const { apiVersion, kind } of RENDERED_KINDS) {
    for (const object of await cluster.list(apiVersion, kind, namespace, deploymentSelector(deploymentId))) {
      if (object.metadata.labels?.[LABELS.revisionId] === revisionId) continue;
      await cluster.delete({ ...object, metadata: { ...object.metadata, namespace } });
      deleted.push(`${kind} ${object.metadata.name}`);
    }
  }
  return deleted;
}
