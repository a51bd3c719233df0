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

/** What pruning never deletes: PostgreSQL (its StatefulSet, and the Secret of the data stores' passwords). */
const KEPT_KINDS: ReadonlySet<string> = new Set(['StatefulSet', 'Secret']);

/**
 * Deletes the deployment's objects that the live revision no longer renders (contract §18): only
 * (kind, name) pairs missing from `rendered` (an autoscaler after `max_scale` came down), never
 * PostgreSQL, its claims or its password Secret; then the env Secrets of other revisions (in one
 * `deletecollection`: the agent may not list Secrets). Before each deletion it checks that
 * `revisionId` is still the live one (the API server Deployment's revision label): once a newer
 * revision has applied, what it renders is not this one's to delete. Answers what it deleted.
 */
export async function pruneEarlier(
  cluster: Cluster,
  namespace: string,
  deploymentId: string,
  revisionId: string,
  rendered: readonly K8sObject[],
  signal: AbortSignal,
): Promise<string[]> {
  const live = rendered.find((o) => o.kind === 'Deployment' && o.metadata.labels?.[LABELS.component] === 'api-server');
  const stillLive = async () => {
    signal.throwIfAborted();
    const stored = live && (await cluster.read(live.apiVersion, live.kind, namespace, live.metadata.name));
    if (stored?.metadata.labels?.[LABELS.revisionId] !== revisionId) throw new Superseded(revisionId);
  };
  const wanted = new Set(rendered.map((o) => `${o.kind}/${o.metadata.name}`));
  const deleted: string[] = [];
  for (const { apiVersion, kind } of RENDERED_KINDS) {
    if (KEPT_KINDS.has(kind)) continue;
    for (const object of await cluster.list(apiVersion, kind, namespace, deploymentSelector(deploymentId))) {
      if (wanted.has(`${kind}/${object.metadata.name}`)) continue;
      await stillLive();
      await cluster.delete({ ...object, metadata: { ...object.metadata, namespace } });
      deleted.push(`${kind} ${object.metadata.name}`);
    }
  }
  await stillLive();
  await cluster.deleteSecrets(namespace, `${deploymentSelector(deploymentId)},${LABELS.component}=api-server,${LABELS.revisionId}!=${revisionId}`);
  deleted.push("other revisions' env Secrets");
  return deleted;
}

/** Pruning stopped: a newer revision is live now, and what it renders is its own. */
export class Superseded extends Error {
  override readonly name = 'Superseded';

  constructor(revisionId: string) {
    super(`revision ${revisionId} is no longer the live one; pruning stopped`);
  }
}
