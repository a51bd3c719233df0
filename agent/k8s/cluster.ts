import { ApiException, CoreV1Api, KubeConfig, KubernetesObjectApi, PatchStrategy } from '@kubernetes/client-node';
import { FIELD_MANAGER, type K8sObject } from './labels.ts';

/** A refusal or failure from the Kubernetes API, with the status code and the API's own message. */
export class ClusterError extends Error {
  override readonly name = 'ClusterError';
  readonly code: number;

  constructor(code: number, message: string) {
    super(message);
    this.code = code;
  }
}

/** The kinds a deployment is made of, in the order they are applied (what others refer to first). */
export const RENDERED_KINDS: ReadonlyArray<{ apiVersion: string; kind: string }> = [
  { apiVersion: 'v1', kind: 'Secret' },
  { apiVersion: 'v1', kind: 'Service' },
  { apiVersion: 'networking.k8s.io/v1', kind: 'NetworkPolicy' },
  { apiVersion: 'apps/v1', kind: 'StatefulSet' },
  { apiVersion: 'apps/v1', kind: 'Deployment' },
  { apiVersion: 'autoscaling/v2', kind: 'HorizontalPodAutoscaler' },
];

/** Read to judge a rollout; deleted at teardown only if the garbage collector has not removed them yet. */
export const PODS = { apiVersion: 'v1', kind: 'Pod' } as const;

/** Made by the StatefulSet's controller from its claim templates, not by the agent: removed at teardown only. */
export const VOLUME_CLAIMS = { apiVersion: 'v1', kind: 'PersistentVolumeClaim' } as const;

/**
 * Where the agent's cluster credentials come from (contract §14): `--kubeconfig FILE`, else the
 * file `KUBECONFIG` names, else the in-cluster service account.
 */
export function loadKubeConfig(kubeconfigFile: string | undefined, env: NodeJS.ProcessEnv): KubeConfig {
  const config = new KubeConfig();
  const file = kubeconfigFile ?? env.KUBECONFIG?.split(':').find((f) => f.length > 0);
  if (file) config.loadFromFile(file);
  else config.loadFromCluster();
  return config;
}

/** The few calls the agent makes on the Kubernetes API, over `@kubernetes/client-node`. */
export class Cluster {
  readonly #api: KubernetesObjectApi;
  readonly #core: CoreV1Api;

  constructor(config: KubeConfig) {
    this.#api = KubernetesObjectApi.makeApiClient(config);
    this.#core = config.makeApiClient(CoreV1Api);
  }

  /**
   * Deletes the namespace's Secrets matching the selector in one call (`deletecollection`): the
   * agent never lists Secrets, so its Role needs no right to read every Secret's data.
   */
  async deleteSecrets(namespace: string, labelSelector: string): Promise<void> {
    await this.#call(() => this.#core.deleteCollectionNamespacedSecret({ namespace, labelSelector, propagationPolicy: 'Background' }));
  }

  /** Server-side apply with our field manager, forced: the rendered object is what we own. */
  async apply(object: K8sObject): Promise<K8sObject> {
    // The client fills in a missing namespace on the object it is given: hand it a copy.
    const copy = forClientModels(structuredClone(object));
    return (await this.#call(() => this.#api.patch(copy, undefined, undefined, FIELD_MANAGER, true, PatchStrategy.ServerSideApply))) as K8sObject;
  }

  /** The object as stored, or null when there is none. */
  async read(apiVersion: string, kind: string, namespace: string, name: string): Promise<K8sObject | null> {
    try {
      return (await this.#call(() => this.#api.read({ apiVersion, kind, metadata: { name, namespace } }))) as K8sObject;
    } catch (error) {
      if (error instanceof ClusterError && error.code === 404) return null;
      throw error;
    }
  }

  /**
   * The objects of a kind in a namespace matching the selector. A 404 means the API does not serve
   * the kind at all (a list in a namespace without objects is an empty list): nothing of it exists.
   */
  async list(apiVersion: string, kind: string, namespace: string, labelSelector: string): Promise<K8sObject[]> {
    let list: { items: unknown[] };
    try {
      list = await this.#call(() => this.#api.list(apiVersion, kind, namespace, undefined, undefined, undefined, undefined, labelSelector));
    } catch (error) {
      if (error instanceof ClusterError && error.code === 404) return [];
      throw error;
    }
    // A list's items carry no type meta; put it back so callers can tell kinds apart.
    return (list.items as K8sObject[]).map((item) => ({ ...item, apiVersion, kind }));
  }

  /** Deletes the object; one already gone counts as deleted. Dependents (pods) go in the background. */
  async delete(object: Pick<K8sObject, 'apiVersion' | 'kind' | 'metadata'>): Promise<void> {
    try {
      await this.#call(() =>
        this.#api.delete(
          { apiVersion: object.apiVersion, kind: object.kind, metadata: { name: object.metadata.name, namespace: object.metadata.namespace } },
          undefined,
          undefined,
          undefined,
          undefined,
          'Background',
        ),
      );
    } catch (error) {
      if (error instanceof ClusterError && error.code === 404) return;
      throw error;
    }
  }

  async #call<T>(request: () => Promise<T>): Promise<T> {
    try {
      return await request();
    } catch (error) {
      throw toClusterError(error);
    }
  }
}

/**
 * The object as `@kubernetes/client-node` serialises it: its models call a NetworkPolicy ingress
 * rule's `from` `_from` (a reserved word for its generator) and silently drop a plain `from`, which
 * would apply a policy that lets no pod in. (Found by the stand-in, which stores what arrives.)
 */
function forClientModels(object: K8sObject): K8sObject {
  if (object.kind !== 'NetworkPolicy') return object;
  const spec = object.spec as { ingress?: Array<Record<string, unknown>> };
  spec.ingress = spec.ingress?.map(({ from, ...rule }) => (from === undefined ? rule : { ...rule, _from: from }));
  return object;
}

/** The API's `Status` message when it sent one (`deployments.apps "x" is forbidden: …`), else what the client said. */
function toClusterError(error: unknown): ClusterError {
  if (error instanceof ApiException) {
    let message = '';
    try {
      const body = (typeof error.body === 'string' ? JSON.parse(error.body) : error.body) as { message?: unknown } | null;
      if (typeof body?.message === 'string') message = body.message;
    } catch {
      // not a Status object
    }
    return new ClusterError(error.code, `Kubernetes API ${error.code}: ${message || String(error.body ?? error.message).slice(0, 500)}`);
  }
  return new ClusterError(0, `Kubernetes API unreachable: ${error instanceof Error ? error.message : String(error)}`);
}
