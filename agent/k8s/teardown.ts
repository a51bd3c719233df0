import type { Cluster } from './cluster.ts';
import { PODS, RENDERED_KINDS, VOLUME_CLAIMS } from './cluster.ts';
import { deploymentSelector } from './labels.ts';

/**
 * Deletes every object labelled with the deployment's id in its namespace, whatever revision made
 * it (its pods too), and its volume claims (PostgreSQL's data) unless `keepVolumes`. Workloads go
 * first so their pods stop before the Secrets and Services they use. Answers what it deleted.
 */
export async function teardownDeployment(cluster: Cluster, namespace: string, deploymentId: string, keepVolumes: boolean): Promise<string[]> {
  // Pods go with their workloads (garbage collection); any still listed (a collector that lags, a
  // pod being replaced) are deleted too, since they carry the deployment's label as well.
  const order: Array<{ apiVersion: string; kind: string }> = [...RENDERED_KINDS].reverse();
  order.push(PODS);
  if (!keepVolumes) order.push(VOLUME_CLAIMS);
  const deleted: string[] = [];
  for (const { apiVersion, kind } of order) {
    for (const object of await cluster.list(apiVersion, kind, namespace, deploymentSelector(deploymentId))) {
      await cluster.delete({ ...object, metadata: { ...object.metadata, namespace } });
      deleted.push(`${kind} ${object.metadata.name}`);
    }
  }
  return deleted;
}
