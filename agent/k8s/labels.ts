/** The field manager of every server-side apply: the cluster records our fields under this name. */
export const FIELD_MANAGER = 'agent-control-plane';

/** The labels every rendered object carries (contract §14); teardown and pruning select by them. */
export const LABELS = {
  managedBy: 'app.kubernetes.io/managed-by',
  component: 'app.kubernetes.io/component',
  deploymentId: 'agent-control-plane/deployment-id',
  revisionId: 'agent-control-plane/revision-id',
} as const;

export const MANAGED_BY = 'agent-control-plane';

export type Component = 'api-server' | 'queue' | 'redis' | 'postgres';

/** A Kubernetes object as the agent renders and reads it: the type meta, the metadata, the rest. */
export type K8sObject = {
  apiVersion: string;
  kind: string;
  metadata: {
    name: string;
    namespace?: string;
    labels?: Record<string, string>;
    annotations?: Record<string, string>;
    [key: string]: unknown;
  };
  [key: string]: unknown;
};

/** `agent-control-plane/deployment-id=<id>`: every object of one deployment, whatever its revision. */
export function deploymentSelector(deploymentId: string): string {
  return `${LABELS.deploymentId}=${deploymentId}`;
}

/** `…/deployment-id=<id>,…/revision-id=<id>`: the objects (and pods) of one revision. */
export function revisionSelector(deploymentId: string, revisionId: string): string {
  return `${deploymentSelector(deploymentId)},${LABELS.revisionId}=${revisionId}`;
}

/**
 * The prefix of every object name of a deployment: its name as a DNS label (cut so that the
 * longest name derived from it, a StatefulSet pod's PVC, stays within 63 characters) and the
 * first 8 characters of its id, so two deployments whose names clean up alike never collide.
 */
export function baseName(deployment: { id: string; name: string }): string {
  let cleaned = deployment.name
    .toLowerCase()
    .replace(/[^a-z0-9-]+/g, '-')
    .replace(/^-+|-+$/g, '')
    .slice(0, 30)
    .replace(/-+$/, '');
  // Service names are DNS-1035 labels: they start with a letter.
  if (!/^[a-z]/.test(cleaned)) cleaned = `d${cleaned ? `-${cleaned}` : ''}`.slice(0, 30).replace(/-+$/, '');
  return `${cleaned}-${deployment.id.slice(0, 8).toLowerCase()}`;
}
