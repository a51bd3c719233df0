/**
 * SIMULATION: a Kubernetes API stand-in for tests. There is no Kubernetes API server on these
 * machines, so this loopback HTTP server answers as one does to `@kubernetes/client-node`, for the
 * kinds the k8s agent uses: discovery (`/api`, `/apis`, group versions), server-side apply
 * (`application/apply-patch+yaml`, `fieldManager`, `force`, conflicts between managers), create,
 * get, list and delete with label selectors, `/status` subresources, `generation` and
 * `resourceVersion`, `Status` error objects, and 401 / 403 for tokens without rights. Every object
 * it stores is validated against the Kubernetes schemas (`kubernetes-models`), and it refuses the
 * changes a real API server refuses to selectors and StatefulSet specs.
 *
 * Server-side apply keeps field ownership per manager in `managedFields` and merges keyed lists
 * item by item (test/k8s/server-side-apply.ts, a simplification of structured-merge-diff).
 *
 * What it does not do by itself: nothing runs. Its "controllers" act only when a test calls them
 * (`reconcile`, `reconcileTimes`, `startControllers`), one step per pass, as time passes on a
 * cluster: pods are `ContainerCreating` first, then run or fail as their images' fate says
 * (crash-loop with a growing restart count, pull failures, `InvalidImageName`,
 * `CreateContainerConfigError`, also for a missing Secret); a Deployment rolls within its
 * `maxSurge` / `maxUnavailable` and writes the real controller's status and conditions
 * (`Progressing`, `Available`, `ReplicaFailure`); a StatefulSet replaces its pod and moves
 * `updateRevision` then `currentRevision`; admission refuses pods in a namespace enforcing Pod
 * Security `restricted` and pods of a missing service account (`FailedCreate`); `autoscale` writes a
 * Deployment's replicas as the HPA controller does, under its own field manager. Simplifications:
 * ReplicaSets are folded into their Deployment (pods carry `pod-template-hash`), readiness is one
 * pass, Pod Security checks only the main `restricted` rules, and no scheduler runs (a test's
 * `unschedulable` says which pods stay `Pending`).
 */
import { execFileSync } from 'node:child_process';
import { createHash, randomUUID } from 'node:crypto';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import { createServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parse as parseYaml } from 'yaml';
import { schemaErrors } from '../../agent/k8s/schemas.ts';
import { recordUpdate, serverSideApply } from './server-side-apply.ts';

type Obj = {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; labels?: Record<string, string>; [key: string]: unknown };
  spec?: any;
  status?: any;
  [key: string]: unknown;
};

type Resource = { group: string; version: string; name: string; kind: string; namespaced: boolean; verbs: string[]; status?: boolean };

const RESOURCES: Resource[] = [
  {
    group: '',
    version: 'v1',
    name: 'secrets',
    kind: 'Secret',
    namespaced: true,
    verbs: ['create', 'delete', 'deletecollection', 'get', 'list', 'patch', 'update'],
  },
  {
    group: '',
    version: 'v1',
    name: 'services',
    kind: 'Service',
    namespaced: true,
    verbs: ['create', 'delete', 'get', 'list', 'patch', 'update'],
    status: true,
  },
  { group: '', version: 'v1', name: 'pods', kind: 'Pod', namespaced: true, verbs: ['create', 'delete', 'get', 'list', 'patch', 'update'], status: true },
  {
    group: '',
    version: 'v1',
    name: 'persistentvolumeclaims',
    kind: 'PersistentVolumeClaim',
    namespaced: true,
    verbs: ['create', 'delete', 'get', 'list', 'patch', 'update'],
    status: true,
  },
  {
    group: '',
    version: 'v1',
    name: 'serviceaccounts',
    kind: 'ServiceAccount',
    namespaced: true,
    verbs: ['create', 'delete', 'get', 'list', 'patch', 'update'],
  },
  { group: '', version: 'v1', name: 'namespaces', kind: 'Namespace', namespaced: false, verbs: ['get', 'list'] },
  {
    group: 'apps',
    version: 'v1',
    name: 'deployments',
    kind: 'Deployment',
    namespaced: true,
    verbs: ['create', 'delete', 'get', 'list', 'patch', 'update'],
    status: true,
  },
  {
    group: 'apps',
    version: 'v1',
    name: 'statefulsets',
    kind: 'StatefulSet',
    namespaced: true,
    verbs: ['create', 'delete', 'get', 'list', 'patch', 'update'],
    status: true,
  },
  {
    group: 'autoscaling',
    version: 'v2',
    name: 'horizontalpodautoscalers',
    kind: 'HorizontalPodAutoscaler',
    namespaced: true,
    verbs: ['create', 'delete', 'get', 'list', 'patch', 'update'],
    status: true,
  },
  {
    group: 'networking.k8s.io',
    version: 'v1',
    name: 'networkpolicies',
    kind: 'NetworkPolicy',
    namespaced: true,
    verbs: ['create', 'delete', 'deletecollection', 'get', 'list', 'patch', 'update'],
  },
  {
    group: 'rbac.authorization.k8s.io',
    version: 'v1',
    name: 'roles',
    kind: 'Role',
    namespaced: true,
    verbs: ['create', 'delete', 'get', 'list', 'patch', 'update'],
  },
  {
    group: 'rbac.authorization.k8s.io',
    version: 'v1',
    name: 'rolebindings',
    kind: 'RoleBinding',
    namespaced: true,
    verbs: ['create', 'delete', 'get', 'list', 'patch', 'update'],
  },
];

/** What a token may do: in which namespaces, on which resources (`deployments.apps`, `secrets`), with which verbs. */
export type Grant = { namespaces: readonly string[]; resources?: readonly string[]; verbs?: readonly string[] };

/** One request as the stand-in saw it: what tests assert on (what was sent, and how). */
export type SeenRequest = { method: string; path: string; query: Record<string, string>; contentType: string | undefined; status: number };

/** How the simulated kubelet treats an image: pulls and runs it, fails to pull it, or the container keeps crashing. */
export type ImageFate =
  | { pull: 'ok' }
  | { pull: 'fail'; reason: 'ErrImagePull' | 'ImagePullBackOff' | 'InvalidImageName'; message: string }
  /** The container exits: `times` times and then it runs (what waits for a database does), or forever. */
  | { pull: 'crash'; message: string; times?: number }
  /** The kubelet cannot build the container's configuration (`CreateContainerConfigError`). */
  | { pull: 'config'; message: string };

/**
 * The stand-in. `start()` listens on 127.0.0.1; `kubeconfig(token)` writes a kubeconfig file for
 * it; `grant(token, …)` gives a token rights (no grant: 403 on everything; unknown token: 401).
 */
export class KubernetesApiStandIn {
  readonly requests: SeenRequest[] = [];
  readonly #objects = new Map<string, Obj>();
  readonly #namespaces = new Set<string>();
  readonly #grants = new Map<string, Grant[]>();
  #resourceVersion = 1000;
  #server: Server | null = null;
  #port = 0;
  #controllers: NodeJS.Timeout | null = null;
  #certificate = '';
  /** SIMULATION: whether deleting an object deletes what it owns at once (the garbage collector); off: never. */
  collectGarbage = true;
  /** SIMULATION: decides for each image whether the pretend kubelet can pull and run it. */
  imageFate: (image: string) => ImageFate = () => ({ pull: 'ok' });
  /** SIMULATION: the scheduler's refusal for a pod spec (the `Unschedulable` message), or null when a node fits it. */
  unschedulable: (podSpec: any) => string | null = () => null;
  readonly #restricted = new Set<string>();
  /** How many kubelet passes each pod has seen (a pod is `ContainerCreating` in its first). */
  readonly #podPasses = new Map<string, number>();

  constructor(namespaces: readonly string[]) {
    for (const ns of namespaces) this.#namespaces.add(ns);
  }

  get url(): string {
    return `https://127.0.0.1:${this.#port}`;
  }

  /**
   * Listens on 127.0.0.1 over TLS, as an API server does, with a self-signed certificate made for
   * this run (openssl); the kubeconfig carries it as the cluster's certificate authority.
   */
  async start(): Promise<this> {
    const dir = mkdtempSync(join(tmpdir(), 'k8s-stand-in-tls-'));
    execFileSync(
      'openssl',
      [
        'req',
        '-x509',
        '-newkey',
        'ec',
        '-pkeyopt',
        'ec_paramgen_curve:prime256v1',
        '-nodes',
        '-days',
        '1',
        '-subj',
        '/CN=kubernetes-api-stand-in',
        '-addext',
        'subjectAltName=IP:127.0.0.1',
        '-keyout',
        join(dir, 'key.pem'),
        '-out',
        join(dir, 'cert.pem'),
      ],
      { stdio: 'ignore' },
    );
    this.#certificate = readFileSync(join(dir, 'cert.pem'), 'utf8');
    this.#server = createServer({ key: readFileSync(join(dir, 'key.pem')), cert: this.#certificate }, (req, res) => {
      this.#serve(req, res).catch((error: unknown) => this.#send(req, res, 500, status(500, 'InternalError', String(error))));
    });
    await new Promise<void>((resolve) => this.#server!.listen(0, '127.0.0.1', resolve));
    this.#port = (this.#server.address() as AddressInfo).port;
    return this;
  }

  async stop(): Promise<void> {
    this.stopControllers();
    if (this.#server) {
      this.#server.closeAllConnections();
      await new Promise<void>((resolve) => this.#server!.close(() => resolve()));
    }
  }

  grant(token: string, grant: Grant): void {
    this.#grants.set(token, [...(this.#grants.get(token) ?? []), grant]);
  }

  /** A token the stand-in knows (401 otherwise) but that may do nothing (403 everywhere). */
  knowToken(token: string): void {
    if (!this.#grants.has(token)) this.#grants.set(token, []);
  }

  /** Writes a kubeconfig for this server and token, as `kubectl config` would; answers its path. */
  kubeconfig(token: string, namespace = 'default'): string {
    const dir = mkdtempSync(join(tmpdir(), 'k8s-stand-in-'));
    const file = join(dir, 'kubeconfig');
    writeFileSync(
      file,
      [
        'apiVersion: v1',
        'kind: Config',
        'clusters:',
        `- name: stand-in`,
        `  cluster: { server: "${this.url}", certificate-authority-data: "${Buffer.from(this.#certificate).toString('base64')}" }`,
        'users:',
        `- name: agent`,
        `  user: { token: "${token}" }`,
        'contexts:',
        `- name: stand-in`,
        `  context: { cluster: stand-in, user: agent, namespace: ${namespace} }`,
        'current-context: stand-in',
        '',
      ].join('\n'),
    );
    return file;
  }

  /** Stored objects of a kind in a namespace (tests read the cluster's state through this). */
  objects(kind: string, namespace: string, selector?: string): Obj[] {
    const match = selector ? parseSelector(selector) : () => true;
    return [...this.#objects.values()]
      .filter((o) => o.kind === kind && o.metadata.namespace === namespace && match(o.metadata.labels ?? {}))
      .map((o) => structuredClone(o));
  }

  get(kind: string, namespace: string, name: string): Obj | undefined {
    const found = this.#objects.get(key(kind, namespace, name));
    return found ? structuredClone(found) : undefined;
  }

  /** Every stored object of every kind (to check that a teardown left nothing). */
  all(): Obj[] {
    return [...this.#objects.values()].map((o) => structuredClone(o));
  }

  // ---- SIMULATED CONTROLLERS: they act only when a test calls them. ----

  /** SIMULATION: namespaces labelled `pod-security.kubernetes.io/enforce: restricted` (pods that break it are refused). */
  enforcePodSecurityRestricted(namespace: string): void {
    this.#restricted.add(namespace);
  }

  /** Runs `reconcile` every `intervalMs` until `stopControllers()`. */
  startControllers(intervalMs = 50): void {
    this.stopControllers();
    this.#controllers = setInterval(() => this.reconcile(), intervalMs);
  }

  stopControllers(): void {
    if (this.#controllers) clearInterval(this.#controllers);
    this.#controllers = null;
  }

  /**
   * SIMULATION of one pass of the kubelet and of the Deployment and StatefulSet controllers. Each
   * pass moves things one step, as time does on a cluster: a new pod is `ContainerCreating` in the
   * pass that makes it and runs (or fails: its images' fate) from the next; a Deployment creates new
   * pods within `maxSurge` and removes old ones within `maxUnavailable` only once enough are
   * available; a StatefulSet replaces its pods one at a time, highest ordinal first. Statuses and
   * conditions are written as the real controllers write them (`ReplicaFailure`, `Progressing`,
   * `Available`; `currentRevision` / `updateRevision`). Pods are refused (`FailedCreate`) by Pod
   * Security `restricted` in a namespace that enforces it, and for a service account that does not exist.
   */
  reconcile(): void {
    for (const pod of [...this.#objects.values()].filter((o) => o.kind === 'Pod')) this.#kubelet(pod);
    for (const workload of [...this.#objects.values()]) {
      if (workload.kind === 'Deployment') this.#reconcileDeployment(workload);
      if (workload.kind === 'StatefulSet') this.#reconcileStatefulSet(workload);
    }
  }

  /** Runs `reconcile` `passes` times. */
  reconcileTimes(passes: number): void {
    for (let i = 0; i < passes; i += 1) this.reconcile();
  }

  /** SIMULATION: the Deployment controller's verdict after `progressDeadlineSeconds` without progress. */
  exceedProgressDeadline(namespace: string, name: string): void {
    const deployment = this.#objects.get(key('Deployment', namespace, name));
    if (!deployment) throw new Error(`no Deployment ${namespace}/${name}`);
    deployment.status = {
      ...deployment.status,
      conditions: [
        ...(deployment.status?.conditions ?? []).filter((c: { type: string }) => c.type !== 'Progressing'),
        { type: 'Progressing', status: 'False', reason: 'ProgressDeadlineExceeded', message: `ReplicaSet "${name}-x" has timed out progressing.` },
      ],
    };
    this.#bump(deployment);
  }

  /**
   * SIMULATION of the HorizontalPodAutoscaler controller choosing `replicas`: it writes the target's
   * `/scale` subresource as `kube-controller-manager` (an Update, subresource `scale`), so it owns
   * `spec.replicas` in the target's managedFields, and bumps its generation, as on a real cluster.
   */
  autoscale(namespace: string, hpaName: string, replicas: number): void {
    const hpa = this.#objects.get(key('HorizontalPodAutoscaler', namespace, hpaName));
    if (!hpa) throw new Error(`no HorizontalPodAutoscaler ${namespace}/${hpaName}`);
    const target = this.#objects.get(key(hpa.spec.scaleTargetRef.kind, namespace, hpa.spec.scaleTargetRef.name));
    if (!target) throw new Error(`the autoscaler's target ${hpa.spec.scaleTargetRef.name} does not exist`);
    const before = structuredClone(target);
    target.spec = { ...target.spec, replicas };
    if (before.spec.replicas !== replicas) {
      target.metadata.managedFields = recordUpdate(before, target, 'kube-controller-manager', 'apps/v1', 'scale');
      target.metadata.generation = ((target.metadata.generation as number) ?? 1) + 1;
      this.#bump(target);
    }
    hpa.status = { ...hpa.status, currentReplicas: before.spec.replicas, desiredReplicas: replicas };
    this.#bump(hpa);
  }

  /** SIMULATION of the kubelet's next step for one pod. */
  #kubelet(pod: Obj): void {
    const age = (this.#podPasses.get(pod.metadata.uid as string) ?? 0) + 1;
    this.#podPasses.set(pod.metadata.uid as string, age);
    if (pod.status?.conditions?.some((c: { type: string; status: string }) => c.type === 'PodScheduled' && c.status === 'False')) return;
    const ns = pod.metadata.namespace!;
    const missingSecret = [...(pod.spec.initContainers ?? []), ...pod.spec.containers]
      .flatMap((c: { envFrom?: Array<{ secretRef?: { name: string; optional?: boolean } }> }) => c.envFrom ?? [])
      .map((e: { secretRef?: { name: string; optional?: boolean } }) => e.secretRef)
      .find((ref: { name: string; optional?: boolean } | undefined) => ref && !ref.optional && !this.#objects.has(key('Secret', ns, ref.name)));
    const statusOf = (container: { name: string; image: string }) => {
      const previous = (pod.status.containerStatuses ?? []).find((s: { name: string }) => s.name === container.name);
      const waiting = (reason: string, message: string, restartCount = 0, lastState?: object) => ({
        name: container.name,
        image: container.image,
        ready: false,
        restartCount,
        state: { waiting: { reason, message } },
        ...(lastState ? { lastState } : {}),
      });
      if (missingSecret) return waiting('CreateContainerConfigError', `secret "${missingSecret.name}" not found`);
      const fate = this.imageFate(container.image);
      if (fate.pull === 'fail') return waiting(fate.reason === 'ErrImagePull' && age > 2 ? 'ImagePullBackOff' : fate.reason, fate.message);
      if (fate.pull === 'config') return waiting('CreateContainerConfigError', fate.message);
      if (fate.pull === 'crash') {
        const crashes = (previous?.restartCount ?? -1) + 1;
        if (fate.times === undefined || crashes < fate.times) {
          return waiting(
            `CrashLoopBackOff`,
            `back-off ${10 * 2 ** Math.min(crashes, 5)}s restarting failed container=${container.name} pod=${pod.metadata.name}`,
            crashes,
            {
              terminated: { exitCode: 1, reason: 'Error', message: fate.message },
            },
          );
        }
      }
      return {
        name: container.name,
        image: container.image,
        ready: true,
        restartCount: previous?.restartCount ?? 0,
        state: { running: { startedAt: previous?.state?.running?.startedAt ?? new Date().toISOString() } },
      };
    };
    const containerStatuses = (pod.spec.containers as Array<{ name: string; image: string }>).map(statusOf);
    const ready = containerStatuses.every((s) => s.ready);
    const status = {
      ...pod.status,
      phase: ready ? 'Running' : 'Pending',
      conditions: [
        { type: 'PodScheduled', status: 'True' },
        { type: 'Ready', status: ready ? 'True' : 'False' },
      ],
      containerStatuses,
    };
    if (JSON.stringify(status) !== JSON.stringify(pod.status)) {
      pod.status = status;
      this.#bump(pod);
    }
  }

  #podsOf(workload: Obj): Obj[] {
    return [...this.#objects.values()].filter(
      (o) =>
        o.kind === 'Pod' &&
        o.metadata.namespace === workload.metadata.namespace &&
        (o.metadata.ownerReferences as Array<{ uid: string }> | undefined)?.[0]?.uid === workload.metadata.uid,
    );
  }

  #deletePod(pod: Obj): void {
    this.#objects.delete(key('Pod', pod.metadata.namespace!, pod.metadata.name));
    this.#podPasses.delete(pod.metadata.uid as string);
  }

  /** SIMULATION of the Deployment controller (its ReplicaSets folded in: pods carry `pod-template-hash`). */
  #reconcileDeployment(deployment: Obj): void {
    const desired: number = deployment.spec?.replicas ?? 1;
    const hash = templateHash(deployment);
    const replicaSet = `${deployment.metadata.name}-${hash}`;
    const pods = this.#podsOf(deployment);
    const current = pods.filter((p) => p.metadata.labels?.['pod-template-hash'] === hash);
    let old = pods.filter((p) => p.metadata.labels?.['pod-template-hash'] !== hash);
    const recreate = deployment.spec?.strategy?.type === 'Recreate';
    const surge = recreate ? 0 : scaled(deployment.spec?.strategy?.rollingUpdate?.maxSurge ?? '25%', desired, true);
    let unavailable = recreate ? desired : scaled(deployment.spec?.strategy?.rollingUpdate?.maxUnavailable ?? '25%', desired, false);
    if (surge === 0 && unavailable === 0) unavailable = 1;
    for (const extra of current.splice(desired)) this.#deletePod(extra);
    const isReady = (p: Obj) => p.status?.conditions?.some((c: { type: string; status: string }) => c.type === 'Ready' && c.status === 'True') === true;
    let failure: string | null = null;
    // Old pods: unready ones first, ready ones only while enough stay available.
    if (recreate) {
      for (const pod of old) this.#deletePod(pod);
      old = [];
    } else {
      const minAvailable = desired - unavailable;
      let available = [...current, ...old].filter(isReady).length;
      const newUnavailable = current.filter((p) => !isReady(p)).length;
      let canRemove = current.length + old.length - minAvailable - newUnavailable;
      for (const pod of [...old].sort((a, b) => Number(isReady(a)) - Number(isReady(b)))) {
        if (canRemove <= 0) break;
        if (isReady(pod)) {
          if (available - 1 < minAvailable) break;
          available -= 1;
        }
        this.#deletePod(pod);
        old = old.filter((p) => p !== pod);
        canRemove -= 1;
      }
    }
    const room = recreate && old.length > 0 ? 0 : desired + surge - (current.length + old.length);
    for (let i = 0; i < Math.min(desired - current.length, room); i += 1) {
      const name = `${replicaSet}-${randomUUID().slice(0, 5)}`;
      failure = this.#admissionRefusal(deployment, name);
      if (failure) break;
      current.push(this.#makePod(deployment, name, { 'pod-template-hash': hash }));
    }
    const ready = [...current, ...old].filter(isReady).length;
    const complete = current.length === desired && old.length === 0 && current.filter(isReady).length === desired;
    const previous = (deployment.status?.conditions ?? []) as Array<{ type: string; reason?: string }>;
    const stalled = previous.find((c) => c.type === 'Progressing' && c.reason === 'ProgressDeadlineExceeded');
    const status: any = {
      observedGeneration: deployment.metadata.generation,
      replicas: current.length + old.length,
      updatedReplicas: current.length,
      readyReplicas: ready,
      availableReplicas: ready,
      ...(desired - ready > 0 ? { unavailableReplicas: desired - ready } : {}),
      conditions: [
        ready >= desired - unavailable
          ? { type: 'Available', status: 'True', reason: 'MinimumReplicasAvailable', message: 'Deployment has minimum availability.' }
          : { type: 'Available', status: 'False', reason: 'MinimumReplicasUnavailable', message: 'Deployment does not have minimum availability.' },
        stalled && !complete
          ? stalled
          : complete
            ? { type: 'Progressing', status: 'True', reason: 'NewReplicaSetAvailable', message: `ReplicaSet "${replicaSet}" has successfully progressed.` }
            : { type: 'Progressing', status: 'True', reason: 'ReplicaSetUpdated', message: `ReplicaSet "${replicaSet}" is progressing.` },
        ...(failure ? [{ type: 'ReplicaFailure', status: 'True', reason: 'FailedCreate', message: failure }] : []),
      ],
    };
    this.#writeStatus(deployment, status);
  }

  /** SIMULATION of the StatefulSet controller: `OrderedReady`, `RollingUpdate` one pod at a time from the highest ordinal. */
  #reconcileStatefulSet(set: Obj): void {
    const desired: number = set.spec?.replicas ?? 1;
    const updateRevision = `${set.metadata.name}-${templateHash(set)}`;
    const pods = this.#podsOf(set);
    const isReady = (p: Obj) => p.status?.conditions?.some((c: { type: string; status: string }) => c.type === 'Ready' && c.status === 'True') === true;
    const revisionOf = (p: Obj) => p.metadata.labels?.['controller-revision-hash'];
    this.#makeClaims(set);
    for (const pod of pods) if (Number(pod.metadata.name.split('-').pop()) >= desired) this.#deletePod(pod);
    const byOrdinal = (i: number) => this.#objects.get(key('Pod', set.metadata.namespace!, `${set.metadata.name}-${i}`));
    let waiting = false;
    for (let i = 0; i < desired && !waiting; i += 1) {
      const pod = byOrdinal(i);
      if (!pod) {
        const name = `${set.metadata.name}-${i}`;
        // A real StatefulSet controller reports a refused pod only as an event (FailedCreate), never
        // as a status condition: the agent, which reads no events, sees it as the rollout deadline.
        if (!this.#admissionRefusal(set, name))
          this.#makePod(set, name, { 'controller-revision-hash': updateRevision, 'statefulset.kubernetes.io/pod-name': name });
        waiting = true;
      } else if (!isReady(pod)) waiting = true;
    }
    if (!waiting) {
      for (let i = desired - 1; i >= 0; i -= 1) {
        const pod = byOrdinal(i);
        if (pod && revisionOf(pod) !== updateRevision) {
          this.#deletePod(pod);
          break;
        }
      }
    }
    const live = this.#podsOf(set);
    const updated = live.filter((p) => revisionOf(p) === updateRevision).length;
    const readyCount = live.filter(isReady).length;
    const currentRevision: string = updated === desired && readyCount === desired ? updateRevision : (set.status?.currentRevision ?? updateRevision);
    const status: any = {
      observedGeneration: set.metadata.generation,
      replicas: live.length,
      readyReplicas: readyCount,
      availableReplicas: readyCount,
      currentReplicas: live.filter((p) => revisionOf(p) === currentRevision).length,
      updatedReplicas: updated,
      currentRevision,
      updateRevision,
      collisionCount: 0,
    };
    this.#writeStatus(set, status);
  }

  /** Deletes an object and, as the garbage collector does, what it owned. */
  #remove(object: Obj): void {
    this.#objects.delete(key(object.kind, object.metadata.namespace!, object.metadata.name));
    for (const [k, o] of this.collectGarbage ? [...this.#objects] : []) {
      if ((o.metadata.ownerReferences as Array<{ uid: string }> | undefined)?.some((r) => r.uid === object.metadata.uid)) this.#objects.delete(k);
    }
  }

  #writeStatus(workload: Obj, status: unknown): void {
    if (JSON.stringify(status) !== JSON.stringify(workload.status)) {
      workload.status = status;
      this.#bump(workload);
    }
  }

  /**
   * SIMULATION of admission for a workload's new pod: why the API server would refuse it (as the
   * controller's `FailedCreate` message says), or null. A service account other than `default`
   * must exist; in a namespace enforcing Pod Security `restricted`, the pod must meet it.
   */
  #admissionRefusal(workload: Obj, podName: string): string | null {
    const ns = workload.metadata.namespace!;
    const spec = workload.spec.template.spec;
    const account: string | undefined = spec.serviceAccountName;
    if (account && account !== 'default' && !this.#objects.has(key('ServiceAccount', ns, account))) {
      return `pods "${podName}" is forbidden: error looking up service account ${ns}/${account}: serviceaccount "${account}" not found`;
    }
    if (!this.#restricted.has(ns)) return null;
    const violations = restrictedViolations(spec);
    return violations.length ? `pods "${podName}" is forbidden: violates PodSecurity "restricted:latest": ${violations.join(', ')}` : null;
  }

  #makePod(workload: Obj, name: string, controllerLabels: Record<string, string>): Obj {
    const template = workload.spec.template;
    const pod: Obj = {
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: {
        name,
        namespace: workload.metadata.namespace,
        uid: randomUUID(),
        labels: { ...(template.metadata?.labels ?? {}), ...controllerLabels },
        ...(template.metadata?.annotations ? { annotations: { ...template.metadata.annotations } } : {}),
        ownerReferences: [{ apiVersion: workload.apiVersion, kind: workload.kind, name: workload.metadata.name, uid: workload.metadata.uid, controller: true }],
      },
      spec: structuredClone(template.spec),
      status: this.unschedulable(template.spec)
        ? {
            phase: 'Pending',
            conditions: [{ type: 'PodScheduled', status: 'False', reason: 'Unschedulable', message: this.unschedulable(template.spec) }],
          }
        : {
            phase: 'Pending',
            conditions: [
              { type: 'PodScheduled', status: 'True' },
              { type: 'Ready', status: 'False' },
            ],
            containerStatuses: (template.spec.containers as Array<{ name: string; image: string }>).map((c) => ({
              name: c.name,
              image: c.image,
              ready: false,
              restartCount: 0,
              state: { waiting: { reason: 'ContainerCreating' } },
            })),
          },
    };
    this.#store(pod, true);
    return pod;
  }

  /** SIMULATION of the StatefulSet controller's claims: one per template, named `<template>-<set>-0`, with the template's labels. */
  #makeClaims(set: Obj): void {
    const ns = set.metadata.namespace!;
    for (const template of set.spec?.volumeClaimTemplates ?? []) {
      const name = `${template.metadata.name}-${set.metadata.name}-0`;
      if (this.#objects.has(key('PersistentVolumeClaim', ns, name))) continue;
      this.#store(
        {
          apiVersion: 'v1',
          kind: 'PersistentVolumeClaim',
          metadata: { name, namespace: ns, labels: { ...(template.metadata.labels ?? {}) } },
          spec: structuredClone(template.spec),
          status: { phase: 'Bound' },
        },
        true,
      );
    }
  }

  // ---- THE API ----

  async #serve(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', this.url);
    const token = /^Bearer (.+)$/.exec(req.headers.authorization ?? '')?.[1];
    if (!token || !this.#grants.has(token)) return this.#send(req, res, 401, status(401, 'Unauthorized', 'Unauthorized'));
    const body = await readBody(req);

    if (req.method === 'GET' && url.pathname === '/api')
      return this.#send(req, res, 200, { kind: 'APIVersions', versions: ['v1'], serverAddressByClientCIDRs: [] });
    if (req.method === 'GET' && url.pathname === '/apis') return this.#send(req, res, 200, apiGroupList());
    const discovery = /^\/(?:api\/(v1)|apis\/([^/]+)\/([^/]+))$/.exec(url.pathname);
    if (req.method === 'GET' && discovery) {
      const group = discovery[2] ?? '';
      const version = discovery[1] ?? discovery[3]!;
      const resources = RESOURCES.filter((r) => r.group === group && r.version === version);
      if (resources.length === 0) return this.#send(req, res, 404, status(404, 'NotFound', 'the server could not find the requested resource'));
      return this.#send(req, res, 200, {
        kind: 'APIResourceList',
        apiVersion: 'v1',
        groupVersion: group ? `${group}/${version}` : version,
        resources: resources.flatMap((r) => [
          { name: r.name, singularName: r.kind.toLowerCase(), namespaced: r.namespaced, kind: r.kind, verbs: r.verbs },
          ...(r.status ? [{ name: `${r.name}/status`, singularName: '', namespaced: r.namespaced, kind: r.kind, verbs: ['get', 'patch', 'update'] }] : []),
        ]),
      });
    }

    const match = /^\/(?:api\/(v1)|apis\/([^/]+)\/([^/]+))\/namespaces\/([^/]+)\/([^/]+)(?:\/([^/]+))?(?:\/(status))?$/.exec(url.pathname);
    if (!match) return this.#send(req, res, 404, status(404, 'NotFound', 'the server could not find the requested resource'));
    const group = match[2] ?? '';
    const version = match[1] ?? match[3]!;
    const ns = decodeURIComponent(match[4]!);
    const resource = RESOURCES.find((r) => r.group === group && r.version === version && r.name === match[5]);
    const name = match[6] ? decodeURIComponent(match[6]) : undefined;
    const subresource = match[7];
    if (!resource) return this.#send(req, res, 404, status(404, 'NotFound', 'the server could not find the requested resource'));
    const verb = verbOf(req.method ?? 'GET', name);
    const qualified = resource.group ? `${resource.name}.${resource.group}` : resource.name;
    if (!this.#allowed(token, ns, qualified, verb)) {
      return this.#send(
        req,
        res,
        403,
        status(
          403,
          'Forbidden',
          `${qualified}${name ? ` "${name}"` : ''} is forbidden: User "system:serviceaccount:stand-in:agent" cannot ${verb} resource "${resource.name}${subresource ? `/${subresource}` : ''}" in API group "${resource.group}" in the namespace "${ns}"`,
          { kind: resource.name, name },
        ),
      );
    }
    if (!this.#namespaces.has(ns)) return this.#send(req, res, 404, status(404, 'NotFound', `namespaces "${ns}" not found`, { kind: 'namespaces', name: ns }));
    const q = Object.fromEntries(url.searchParams);

    if (req.method === 'GET' && !name) {
      const items = this.objects(resource.kind, ns, q.labelSelector);
      return this.#send(req, res, 200, {
        kind: `${resource.kind}List`,
        apiVersion: resource.group ? `${resource.group}/${resource.version}` : resource.version,
        metadata: { resourceVersion: String(this.#resourceVersion) },
        items: items.map(({ apiVersion: _a, kind: _k, ...rest }) => rest),
      });
    }
    if (!name && req.method === 'DELETE') {
      // deletecollection: every object of the kind matching the selector, without reading them out.
      const items = this.objects(resource.kind, ns, q.labelSelector);
      for (const item of items) this.#remove(item);
      return this.#send(req, res, 200, { kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Success', details: { kind: resource.name } });
    }
    if (!name) {
      if (req.method !== 'POST')
        return this.#send(req, res, 405, status(405, 'MethodNotAllowed', 'the server does not allow this method on the requested resource'));
      const object = parseObject(body, req.headers['content-type']);
      if (!object) return this.#send(req, res, 400, status(400, 'BadRequest', 'the body is not a Kubernetes object'));
      object.metadata = { ...object.metadata, namespace: ns };
      if (this.#objects.has(key(resource.kind, ns, object.metadata.name)))
        return this.#send(
          req,
          res,
          409,
          status(409, 'AlreadyExists', `${qualified} "${object.metadata.name}" already exists`, { kind: resource.name, name: object.metadata.name }),
        );
      return this.#write(req, res, resource, qualified, null, object, q.fieldManager ?? 'unknown', 'Update', 201);
    }
    const existing = this.#objects.get(key(resource.kind, ns, name));
    const notFound = () =>
      this.#send(req, res, 404, status(404, 'NotFound', `${qualified} "${name}" not found`, { kind: resource.name, name, group: resource.group }));

    if (req.method === 'GET') return existing ? this.#send(req, res, 200, existing) : notFound();
    if (req.method === 'DELETE') {
      if (!existing) return notFound();
      this.#remove(existing);
      return this.#send(req, res, 200, {
        kind: 'Status',
        apiVersion: 'v1',
        metadata: {},
        status: 'Success',
        details: { name, group: resource.group, kind: resource.name, uid: existing.metadata.uid },
      });
    }
    if (subresource === 'status') {
      if (!existing) return notFound();
      const given = parseObject(body, req.headers['content-type']);
      if (!given) return this.#send(req, res, 400, status(400, 'BadRequest', 'the body is not a Kubernetes object'));
      const next = structuredClone(existing);
      next.status = req.method === 'PUT' ? given.status : mergePatch(existing.status ?? {}, given.status ?? {});
      return this.#write(req, res, resource, qualified, existing, next, q.fieldManager ?? 'unknown', 'Update', 200, true);
    }
    if (req.method === 'PATCH') {
      const contentType = (req.headers['content-type'] ?? '').split(';')[0];
      if (contentType === 'application/apply-patch+yaml') {
        if (!q.fieldManager)
          return this.#send(
            req,
            res,
            400,
            status(400, 'BadRequest', 'PatchOptions.meta.k8s.io "" is invalid: fieldManager: Required value: is required for apply patch'),
          );
        const applied = parseObject(body, contentType);
        if (!applied) return this.#send(req, res, 400, status(400, 'BadRequest', 'error decoding YAML: the body is not a Kubernetes object'));
        if (applied.metadata.name !== name)
          return this.#send(
            req,
            res,
            400,
            status(400, 'BadRequest', `the name of the object (${applied.metadata.name}) does not match the name on the URL (${name})`),
          );
        const apiVersion = resource.group ? `${resource.group}/${resource.version}` : resource.version;
        const outcome = serverSideApply(
          existing ?? null,
          { ...applied, metadata: { ...applied.metadata, namespace: ns } },
          q.fieldManager,
          q.force === 'true',
          apiVersion,
        );
        if ('conflicts' in outcome) {
          return this.#send(
            req,
            res,
            409,
            status(
              409,
              'Conflict',
              `Apply failed with ${outcome.conflicts.length} conflict${outcome.conflicts.length === 1 ? '' : 's'}: ${outcome.conflicts.join('\n')}`,
              {
                kind: resource.name,
                name,
              },
            ),
          );
        }
        const next = outcome.object as Obj;
        next.metadata.managedFields = outcome.managedFields;
        return this.#write(req, res, resource, qualified, existing ?? null, next, q.fieldManager, 'Apply', existing ? 200 : 201);
      }
      if (contentType === 'application/merge-patch+json') {
        if (!existing) return notFound();
        const patch = parseObject(body, contentType);
        const next = mergePatch(existing, without(patch ?? {}, ['status'])) as Obj;
        return this.#write(req, res, resource, qualified, existing, next, q.fieldManager ?? 'unknown', 'Update', 200);
      }
      return this.#send(
        req,
        res,
        415,
        status(
          415,
          'UnsupportedMediaType',
          `the body of the request was in an unknown format - accepted media types include: application/apply-patch+yaml, application/merge-patch+json`,
        ),
      );
    }
    if (req.method === 'PUT') {
      if (!existing) return notFound();
      const given = parseObject(body, req.headers['content-type']);
      if (!given) return this.#send(req, res, 400, status(400, 'BadRequest', 'the body is not a Kubernetes object'));
      if (given.metadata.resourceVersion && given.metadata.resourceVersion !== existing.metadata.resourceVersion) {
        return this.#send(
          req,
          res,
          409,
          status(
            409,
            'Conflict',
            `Operation cannot be fulfilled on ${qualified} "${name}": the object has been modified; please apply your changes to the latest version and try again`,
          ),
        );
      }
      return this.#write(req, res, resource, qualified, existing, { ...given, status: existing.status }, q.fieldManager ?? 'unknown', 'Update', 200);
    }
    return this.#send(req, res, 405, status(405, 'MethodNotAllowed', 'the server does not allow this method on the requested resource'));
  }

  /** Validates, applies the server's defaults and immutability rules, stores and answers. */
  #write(
    req: IncomingMessage,
    res: ServerResponse,
    resource: Resource,
    _qualified: string,
    existing: Obj | null,
    next: Obj,
    manager: string,
    operation: 'Apply' | 'Update',
    code: number,
    statusOnly = false,
  ): void {
    next.apiVersion = resource.group ? `${resource.group}/${resource.version}` : resource.version;
    next.kind = resource.kind;
    if (resource.kind === 'Deployment')
      next.spec = {
        replicas: 1,
        strategy: { type: 'RollingUpdate', rollingUpdate: { maxUnavailable: '25%', maxSurge: '25%' } },
        progressDeadlineSeconds: 600,
        ...next.spec,
      };
    const { managedFields: _m, uid: _u, resourceVersion: _r, generation: _g, creationTimestamp: _c, ...given } = next.metadata;
    const invalid = schemaErrors({ ...next, metadata: given });
    if (invalid)
      return this.#send(
        req,
        res,
        422,
        status(422, 'Invalid', `${resource.kind}.${resource.group || 'core'} "${next.metadata.name}" is invalid: ${invalid}`, {
          kind: resource.name,
          name: next.metadata.name,
        }),
      );
    const immutable = existing && !statusOnly ? immutableChange(resource.kind, existing, next) : null;
    if (immutable)
      return this.#send(
        req,
        res,
        422,
        status(422, 'Invalid', `${resource.kind}.${resource.group} "${next.metadata.name}" is invalid: ${immutable}`, {
          kind: resource.name,
          name: next.metadata.name,
        }),
      );
    if (existing) {
      next.metadata.uid = existing.metadata.uid;
      next.metadata.creationTimestamp = existing.metadata.creationTimestamp;
      next.metadata.generation = existing.metadata.generation;
      if (!statusOnly) next.status = existing.status;
      const specChanged = JSON.stringify(existing.spec ?? null) !== JSON.stringify(next.spec ?? null);
      if (specChanged) next.metadata.generation = ((existing.metadata.generation as number | undefined) ?? 1) + 1;
      if (operation === 'Update') next.metadata.managedFields = recordUpdate(existing, next, manager, next.apiVersion, statusOnly ? 'status' : undefined);
      const comparable = (o: Obj) =>
        JSON.stringify(
          without({ ...o, metadata: { ...o.metadata, resourceVersion: '', managedFields: untimed(o.metadata.managedFields) } }, statusOnly ? [] : ['status']),
        );
      if (comparable(existing) === comparable(next)) {
        // Nothing changed: a real API server answers the stored object without a new resourceVersion.
        return this.#send(req, res, 200, existing);
      }
    } else if (operation === 'Update') {
      next.metadata.managedFields = recordUpdate({ metadata: {} }, next, manager, next.apiVersion);
    }
    this.#store(next, !existing);
    return this.#send(req, res, code, next);
  }

  #store(object: Obj, created: boolean): void {
    if (created) {
      object.metadata.uid ??= randomUUID();
      object.metadata.creationTimestamp ??= new Date().toISOString();
      object.metadata.generation ??= 1;
    }
    this.#resourceVersion += 1;
    object.metadata.resourceVersion = String(this.#resourceVersion);
    this.#objects.set(key(object.kind, object.metadata.namespace!, object.metadata.name), object);
  }

  #bump(object: Obj): void {
    this.#resourceVersion += 1;
    object.metadata.resourceVersion = String(this.#resourceVersion);
  }

  #allowed(token: string, namespace: string, resource: string, verb: string): boolean {
    return (this.#grants.get(token) ?? []).some(
      (g) =>
        (g.namespaces.includes('*') || g.namespaces.includes(namespace)) &&
        (!g.resources || g.resources.includes(resource)) &&
        (!g.verbs || g.verbs.includes(verb)),
    );
  }

  #send(req: IncomingMessage, res: ServerResponse, code: number, body: unknown): void {
    const url = new URL(req.url ?? '/', 'http://stand-in');
    this.requests.push({
      method: req.method ?? 'GET',
      path: url.pathname,
      query: Object.fromEntries(url.searchParams),
      contentType: req.headers['content-type'],
      status: code,
    });
    res.writeHead(code, { 'content-type': 'application/json' });
    res.end(JSON.stringify(body));
  }
}

/** The hash of a workload's pod template, as its controller names the template's ReplicaSet or revision by. */
function templateHash(workload: Obj): string {
  return createHash('sha256')
    .update(JSON.stringify(workload.spec?.template ?? {}))
    .digest('hex')
    .slice(0, 10);
}

/** `maxSurge` / `maxUnavailable`: a count, or a percentage of the desired replicas (surge rounds up, unavailable down). */
function scaled(value: number | string, desired: number, roundUp: boolean): number {
  if (typeof value === 'number') return value;
  const share = (Number.parseInt(value, 10) / 100) * desired;
  return roundUp ? Math.ceil(share) : Math.floor(share);
}

/**
 * SIMULATION of the Pod Security `restricted` profile's main checks (kubernetes/pod-security-admission
 * `policy/check_*.go`), with their messages: privileged, host namespaces and paths, privilege
 * escalation, capabilities, non-root, seccomp.
 */
export function restrictedViolations(spec: any): string[] {
  const containers: Array<{ name: string; securityContext?: any }> = [...(spec.initContainers ?? []), ...(spec.containers ?? [])];
  const pod = spec.securityContext ?? {};
  const out: string[] = [];
  const failing = (test: (c: { name: string; securityContext?: any }) => boolean) =>
    containers
      .filter(test)
      .map((c) => `"${c.name}"`)
      .join(', ');
  const privileged = failing((c) => c.securityContext?.privileged === true);
  if (privileged) out.push(`privileged (containers ${privileged} must not set securityContext.privileged=true)`);
  if (spec.hostNetwork || spec.hostPID || spec.hostIPC) out.push('host namespaces (hostNetwork=true, hostPID=true or hostIPC=true)');
  const hostPaths = (spec.volumes ?? []).filter((v: { hostPath?: unknown }) => v.hostPath).map((v: { name: string }) => `"${v.name}"`);
  if (hostPaths.length) out.push(`hostPath volumes (volumes ${hostPaths.join(', ')})`);
  const escalation = failing((c) => c.securityContext?.allowPrivilegeEscalation !== false);
  if (escalation) out.push(`allowPrivilegeEscalation != false (containers ${escalation} must set securityContext.allowPrivilegeEscalation=false)`);
  const capabilities = failing((c) => !(c.securityContext?.capabilities?.drop ?? []).includes('ALL'));
  if (capabilities) out.push(`unrestricted capabilities (containers ${capabilities} must set securityContext.capabilities.drop=["ALL"])`);
  const root = failing((c) => (c.securityContext?.runAsNonRoot ?? pod.runAsNonRoot) !== true);
  if (root) out.push(`runAsNonRoot != true (pod or containers ${root} must set securityContext.runAsNonRoot=true)`);
  const seccomp = failing((c) => !['RuntimeDefault', 'Localhost'].includes(c.securityContext?.seccompProfile?.type ?? pod.seccompProfile?.type));
  if (seccomp) out.push(`seccompProfile (pod or containers ${seccomp} must set securityContext.seccompProfile.type to "RuntimeDefault" or "Localhost")`);
  return out;
}

/** managedFields without their times, to tell a write that changed nothing. */
function untimed(entries: unknown): unknown {
  return ((entries as Array<Record<string, unknown>> | undefined) ?? []).map(({ time: _t, ...e }) => e);
}

/** The changes a real API server refuses with 422: a selector, and StatefulSet spec fields other than the few it allows. */
function immutableChange(kind: string, before: Obj, after: Obj): string | null {
  if ((kind === 'Deployment' || kind === 'StatefulSet') && JSON.stringify(before.spec?.selector) !== JSON.stringify(after.spec?.selector)) {
    return `spec.selector: Invalid value: field is immutable`;
  }
  if (kind === 'StatefulSet') {
    const mutable = ['replicas', 'template', 'updateStrategy', 'persistentVolumeClaimRetentionPolicy', 'minReadySeconds', 'ordinals'];
    if (JSON.stringify(without(before.spec ?? {}, mutable)) !== JSON.stringify(without(after.spec ?? {}, mutable))) {
      return `spec: Forbidden: updates to statefulset spec for fields other than 'replicas', 'ordinals', 'template', 'updateStrategy', 'persistentVolumeClaimRetentionPolicy' and 'minReadySeconds' are forbidden`;
    }
  }
  return null;
}

function verbOf(method: string, name: string | undefined): string {
  if (method === 'GET') return name ? 'get' : 'list';
  if (method === 'DELETE' && !name) return 'deletecollection';
  if (method === 'POST') return 'create';
  if (method === 'PUT') return 'update';
  if (method === 'PATCH') return 'patch';
  if (method === 'DELETE') return 'delete';
  return method.toLowerCase();
}

function apiGroupList() {
  const groups = new Map<string, string[]>();
  for (const r of RESOURCES) if (r.group) groups.set(r.group, [...new Set([...(groups.get(r.group) ?? []), r.version])]);
  return {
    kind: 'APIGroupList',
    apiVersion: 'v1',
    groups: [...groups].map(([name, versions]) => ({
      name,
      versions: versions.map((v) => ({ groupVersion: `${name}/${v}`, version: v })),
      preferredVersion: { groupVersion: `${name}/${versions[0]}`, version: versions[0] },
    })),
  };
}

/** A `Status` object, as the API server sends with every error. */
function status(code: number, reason: string, message: string, details?: Record<string, unknown>) {
  return { kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Failure', message, reason, ...(details ? { details } : {}), code };
}

function key(kind: string, namespace: string, name: string): string {
  return `${kind}/${namespace}/${name}`;
}

/** Label selectors as the API takes them: `k=v`, `k==v`, `k!=v`, `k`, `!k`, comma-separated (all must hold). */
export function parseSelector(selector: string): (labels: Record<string, string>) => boolean {
  const terms = selector
    .split(',')
    .map((t) => t.trim())
    .filter(Boolean)
    .map((term) => {
      const notEqual = /^([^!=]+)!=(.*)$/.exec(term);
      if (notEqual) return (l: Record<string, string>) => l[notEqual[1] ?? ''] !== notEqual[2];
      const equal = /^([^!=]+)==?(.*)$/.exec(term);
      if (equal) return (l: Record<string, string>) => l[equal[1] ?? ''] === equal[2];
      const absent = /^!(.+)$/.exec(term);
      if (absent) return (l: Record<string, string>) => !((absent[1] ?? '') in l);
      return (l: Record<string, string>) => term in l;
    });
  return (labels) => terms.every((t) => t(labels));
}

function readBody(req: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    let text = '';
    req.on('data', (chunk: Buffer) => (text += chunk.toString()));
    req.on('end', () => resolve(text));
    req.on('error', reject);
  });
}

/** A body as the API server reads one: JSON, or YAML for apply (JSON is YAML too). */
function parseObject(body: string, contentType: string | undefined): Obj | null {
  try {
    const value = contentType?.includes('yaml') ? parseYaml(body) : JSON.parse(body);
    return value && typeof value === 'object' && value.metadata && typeof value.metadata.name === 'string' ? (value as Obj) : null;
  } catch {
    return null;
  }
}

function without<T extends object>(value: T, fields: readonly string[]): Record<string, unknown> {
  return Object.fromEntries(Object.entries(value).filter(([k]) => !fields.includes(k)));
}

/** RFC 7386 JSON merge patch. */
function mergePatch(target: unknown, patch: unknown): unknown {
  if (patch === null || typeof patch !== 'object' || Array.isArray(patch)) return patch;
  const out: Record<string, unknown> = target && typeof target === 'object' && !Array.isArray(target) ? { ...(target as Record<string, unknown>) } : {};
  for (const [k, v] of Object.entries(patch)) {
    if (v === null) delete out[k];
    else out[k] = mergePatch(out[k], v);
  }
  return out;
}
