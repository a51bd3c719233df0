import type { Cluster } from './cluster.ts';
import { RENDERED_KINDS, VOLUME_CLAIMS } from './cluster.ts';
import { deploymentSelector } from './labels.ts';

/**
 * Deletes every object labelled with the deployment's id in its namespace, whatever revision made
 * it, and its volume claims (PostgreSQL's data) unless `keepVolumes`. Workloads go first so their
 * pods stop before the Secrets and Services they use; the pods go with them (the garbage
 * collector: the agent has no right to delete pods), and the Secrets in one `deletecollection`
 * (it has no right to list them). Answers what it deleted.
 */
export async function teardownDeployment(cluster: Cluster, namespace: string, deploymentId: string, keepVolumes: boolean): Promise<string[]> {
  const order: Array<{ apiVersion: string; kind: string }> = [...RENDERED_KINDS].reverse().filter((k) => k.kind !== 'Secret');
  if (!keepVolumes) order.push(VOLUME_CLAIMS);
  const deleted: string[] = [];
  for (const { apiVersion, kind } of order) {
    for (const object of await cluster.list(apiVersion, kind, namespace, deploymentSelector(deploymentId))) {
      await cluster.delete({ ...object, metadata: { ...object.metadata, namespace } });
      deleted.push(`${kind} ${object.metadata.name}`);
    }
  }
  await cluster.deleteSecrets(namespace, deploymentSelector(deploymentId));
  deleted.push('its Secrets');
  return deleted;
}
